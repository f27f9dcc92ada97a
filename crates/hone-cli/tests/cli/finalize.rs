//! `hone finalize`: one commit per keep (or one squashed commit) pushed to a bare repository
//! standing in for GitHub, a pull request opened, and errors that say what to do.

use crate::support::*;

/// A run with keeps at #1 and #3 (score 5 -> 4 -> 3) and a discard at #2, plus a bare
/// repository on disk standing in for GitHub: `origin` fetches from a github.com URL (which
/// names the owner and repository) and pushes to the bare repository through `pushurl`, as a
/// user's own remote configuration would.
fn finalize_repo() -> (Repo, PathBuf) {
    let r = Repo::scored(4, KEEPS_SCRIPT);
    r.run_expect("t1", &["baseline", "keep", "discard", "keep"]);
    let bare = r.bare_remote("remote.git");
    r.origin_pushing_to("https://github.com/acme/widgets.git", &bare);
    (r, bare)
}

/// What the user's checkout looks like: HEAD, its branch, status, and the index's bytes.
fn checkout_state(r: &Repo) -> (String, String, String, Vec<u8>) {
    (
        r.rev("HEAD"),
        git(&r.dir, &["symbolic-ref", "HEAD"]),
        git(&r.dir, &["status", "--porcelain"]),
        std::fs::read(r.dir.join(".git/index")).unwrap(),
    )
}

#[test]
fn finalize_pushes_one_commit_per_keep_and_opens_a_pull_request() {
    let (r, bare) = finalize_repo();
    // A user mid-work: a staged edit and an unstaged one.
    put(r.dir.join("prepare.py"), "# staged\n");
    git(&r.dir, &["add", "prepare.py"]);
    put(r.dir.join("value.txt"), "score: 99\n");
    let before = checkout_state(&r);
    let api = LlmServer::github_opening_pr(42);
    let out = ok(hone_env(
        &r,
        &["finalize", "--run", "t1", "--pr"],
        &[("GITHUB_TOKEN", "ghp_test"), ("GITHUB_API_URL", &api.url)],
    ));
    assert_says(
        &out,
        "opened pull request #42: https://github.com/acme/widgets/pull/42",
    );
    // The user's branch, index and working tree are as they were.
    assert_eq!(checkout_state(&r), before);
    assert_eq!(
        std::fs::read_to_string(r.dir.join("value.txt")).unwrap(),
        "score: 99\n"
    );
    // The pushed branch: base <- keep #1 <- keep #3, each with the keep's exact tree.
    let head = git(&bare, &["rev-parse", "refs/heads/hone/t1-final"]);
    assert_eq!(head, r.rev("hone/t1-final"));
    let tree = |rev: &str, dir: &Path| git(dir, &["rev-parse", &format!("{rev}^{{tree}}")]);
    assert_eq!(tree(&head, &bare), tree("refs/hone/t1/3", &r.dir));
    assert_eq!(
        tree(&format!("{head}^"), &bare),
        tree("refs/hone/t1/1", &r.dir)
    );
    assert_eq!(
        git(&bare, &["rev-parse", &format!("{head}~2")]),
        r.rev("main")
    );
    let messages = git(
        &bare,
        &["log", "--format=%B%x00", &format!("{head}~2..{head}")],
    );
    let messages: Vec<&str> = messages
        .split('\0')
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages[0].starts_with("lower still\n\nscore: 4.000000 → 3.000000 (-1.000000, better)"),
        "{}",
        messages[0]
    );
    assert!(
        messages[1]
            .starts_with("lower is better\n\nscore: 5.000000 → 4.000000 (-1.000000, better)"),
        "{}",
        messages[1]
    );
    assert!(messages[1].contains("Hone-Experiment: 1"));
    // The request GitHub got.
    let reqs = api.requests();
    assert_eq!(reqs.len(), 1);
    let (path, headers, body) = &reqs[0];
    assert_eq!(path, "/repos/acme/widgets/pulls");
    let header = |k: &str| {
        headers
            .iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    };
    assert_eq!(header("authorization"), "Bearer ghp_test");
    assert_eq!(header("accept"), "application/vnd.github+json");
    assert_eq!(header("x-github-api-version"), "2022-11-28");
    let json: serde_json::Value = serde_json::from_str(body).unwrap();
    assert_eq!(json["head"], "hone/t1-final");
    assert_eq!(json["base"], "main");
    assert_eq!(
        json["title"],
        "hone run t1: score 5.000000 → 3.000000 (-40.00%)"
    );
    let body = json["body"].as_str().unwrap();
    assert!(
        body.contains("**baseline → best**: 5.000000 → 3.000000"),
        "{body}"
    );
    assert!(body.contains("## Top improvements"), "{body}");
    assert!(body.contains("## Progress\n\n```text\n"), "{body}");
    assert!(
        !body.contains("progress.svg"),
        "no image GitHub cannot show: {body}"
    );
}

#[test]
fn finalize_squash_makes_one_commit_with_the_last_keeps_tree() {
    let (r, _bare) = finalize_repo();
    let before = checkout_state(&r);
    ok(r.hone(&["finalize", "--squash", "--branch", "review/t1"]));
    assert_eq!(checkout_state(&r), before);
    assert_eq!(r.rev("review/t1^{tree}"), r.rev("refs/hone/t1/3^{tree}"));
    assert_eq!(r.rev("review/t1^"), r.rev("main"));
    let msg = git(&r.dir, &["log", "-1", "--format=%B", "review/t1"]);
    assert!(
        msg.starts_with("hone run t1: score: 5.000000 → 3.000000 (-2.000000, better)"),
        "{msg}"
    );
    assert!(
        msg.contains("- experiment 1 lower is better: score: 5.000000 → 4.000000"),
        "{msg}"
    );
    assert!(
        msg.contains("- experiment 3 lower still: score: 4.000000 → 3.000000"),
        "{msg}"
    );
    // Never overwritten.
    let again = r.hone(&["finalize", "--squash", "--branch", "review/t1"]);
    assert!(!again.status.success());
    assert_says(&again, "branch review/t1 already exists");
}

#[test]
fn finalize_errors_say_what_to_do_and_push_nothing() {
    let (r, bare) = finalize_repo();
    let pushed = || git(&bare, &["for-each-ref"]);
    // No token.
    let out = hone_env(&r, &["finalize", "--pr"], &[]);
    assert!(!out.status.success());
    assert_says(&out, "GITHUB_TOKEN is not set");
    // A remote that is not on GitHub.
    git(&r.dir, &["remote", "add", "disk", bare.to_str().unwrap()]);
    let out = hone_env(
        &r,
        &["finalize", "--pr", "--remote", "disk"],
        &[("GITHUB_TOKEN", "t")],
    );
    assert!(!out.status.success());
    assert_says(&out, "is not a GitHub repository");
    assert_eq!(pushed(), "", "nothing is pushed before the checks pass");
    assert!(git(&r.dir, &["branch", "--list", "hone/t1-final"]).is_empty());
    // GitHub's own message comes through.
    let api = LlmServer::start(
        vec![Reply::Status(
            422,
            Vec::new(),
            r#"{"message": "Validation Failed", "errors": [{"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for acme:hone/t1-final."}]}"#.into(),
        )],
        false,
    );
    let out = hone_env(
        &r,
        &["finalize", "--pr"],
        &[("GITHUB_TOKEN", "t"), ("GITHUB_API_URL", &api.url)],
    );
    assert!(!out.status.success());
    assert_says(&out, "GitHub refused the pull request (HTTP 422): Validation Failed: A pull request already exists for acme:hone/t1-final.");
    // A run with nothing kept.
    let r = Repo::scored(2, &scores(&[9]));
    assert!(r.hone(&["run", "--tag", "flat"]).status.success());
    let out = r.hone(&["finalize"]);
    assert!(!out.status.success());
    assert_says(&out, "run `flat` has no kept experiments");
}

#[test]
fn what_the_agent_wrote_closes_no_issue_and_mentions_no_one_on_github() {
    // The keep's hypothesis is written to act on GitHub when the change is merged: close an
    // issue, notify a team. In the commit and the pull request's body it reads the same but
    // refers to nothing.
    let r = Repo::scored(
        2,
        "write\tvalue.txt\tscore: 4\\n\nhypothesis\tCloses #7 and fixes acme/other#9, cc @acme/security\n",
    );
    r.run_expect("t1", &["baseline", "keep"]);
    let bare = r.bare_remote("remote.git");
    r.origin_pushing_to("https://github.com/acme/widgets.git", &bare);
    let api = LlmServer::github_opening_pr(42);
    ok(hone_env(
        &r,
        &["finalize", "--run", "t1", "--pr"],
        &[("GITHUB_TOKEN", "ghp_test"), ("GITHUB_API_URL", &api.url)],
    ));
    let message = git(
        &bare,
        &["log", "-1", "--format=%B", "refs/heads/hone/t1-final"],
    );
    let body: serde_json::Value = serde_json::from_str(&api.requests()[0].2).unwrap();
    let body = body["body"].as_str().unwrap().to_string();
    for text in [message, body] {
        assert!(text.contains("Closes #\u{200b}7"), "{text}");
        assert!(text.contains("acme/other#\u{200b}9"), "{text}");
        assert!(text.contains("@\u{200b}acme/security"), "{text}");
        assert!(!text.contains("#7") && !text.contains("@acme"), "{text}");
    }
}
