//! Tests of the host: credit, restore, filters and resampling, faults.

use super::record::shapers;
use super::*;
use crate::meta::testing::{config, kept_if};
use crate::meta::{Candidate, Guidance, Verdict};
use crate::propose::knobs::Config;
use crate::propose::optimizer::KnobsProposer;
use crate::propose::testing::Repo;
use crate::propose::{ProposeContext, ProposeError};
use crate::store::{Effect, Status};
use std::path::Path;

#[test]
fn an_experiment_is_credited_to_the_candidate_it_used_else_to_its_guidance() {
    let call = |m: &str, hook: Hook, e: Effect| MechanismCall {
        experiment: 3,
        mechanism: m.into(),
        hook,
        effect: e,
        detail: String::new(),
    };
    let calls = vec![
        call("bandit", Hook::BeforePropose, Effect::Guided),
        call("plateau", Hook::BeforePropose, Effect::None),
        call("tabu", Hook::Filter, Effect::Rejected),
        call("surrogate", Hook::Candidates, Effect::Suggested),
        call("explore", Hook::Candidates, Effect::Suggested),
        call("steer", Hook::Filter, Effect::Modified),
    ];
    assert_eq!(
        shapers(&calls, Some("surrogate")),
        ["surrogate", "tabu", "steer"]
    );
    assert_eq!(shapers(&calls, None), ["bandit", "tabu", "steer"]);
}

/// Modifies the first proposal into `target`, then accepts.
struct Steer {
    target: Config,
}

impl Mechanism for Steer {
    fn name(&self) -> &str {
        "steer"
    }
    fn filter(&mut self, c: &Candidate<'_>, _view: &View<'_>) -> Verdict {
        match c.config {
            Some(config) if *config != self.target => {
                Verdict::Modify(self.target.clone(), "steered".into())
            }
            _ => Verdict::Accept,
        }
    }
}

/// Rejects everything.
struct Wall;

impl Mechanism for Wall {
    fn name(&self) -> &str {
        "wall"
    }
    fn filter(&mut self, _c: &Candidate<'_>, _view: &View<'_>) -> Verdict {
        Verdict::Reject("nothing passes".into())
    }
}

/// Runs `f` with a proposal context over a repository holding two integer knobs.
fn with_ctx(f: impl FnOnce(&ProposeContext<'_>, &Path)) {
    let repo = Repo::new(
        "printf 'A = 3  # hone: int 1..9\\nB = 3  # hone: int 1..9\\n' > p.txt",
        "[loop]\neditable = [\"p.txt\"]\n[verify]\ncommand = \"true\"\nmetric = \"m\"\n",
    );
    let wt = repo.root.join(".hone/wt");
    repo.git.prepare_worktree(&wt, &repo.head).unwrap();
    let base = config(&[("A", 3), ("B", 3)]);
    let history = vec![ExperimentRecord {
        n: 0,
        status: Some(crate::store::Status::Baseline),
        objective: Some(1.0),
        config: serde_json::to_value(&base).ok(),
        ..Default::default()
    }];
    let guidance = Guidance::default();
    let ctx = repo.ctx(1, &wt, &history, Some(&history[0]), &guidance);
    f(&ctx, &wt);
}

fn spec() -> Spec {
    Spec::parse(
        Path::new("hone.toml"),
        "[loop]\neditable = [\"p.txt\"]\n[verify]\ncommand = \"true\"\nmetric = \"m\"\n",
    )
    .unwrap()
}

/// Offers one configuration for experiment 1 only.
struct Offer(Config);

impl Mechanism for Offer {
    fn name(&self) -> &str {
        "offer"
    }
    fn candidates(&mut self, view: &View<'_>) -> Vec<Config> {
        if view.n == 1 {
            vec![self.0.clone()]
        } else {
            Vec::new()
        }
    }
}

/// Always gives the proposer a line of advice.
struct Hint;

impl Mechanism for Hint {
    fn name(&self) -> &str {
        "hint"
    }
    fn before_propose(&mut self, _view: &View<'_>) -> Guidance {
        Guidance {
            text: vec!["try something".into()],
            ..Guidance::default()
        }
    }
}

#[test]
fn outcomes_are_credited_to_the_mechanisms_that_shaped_them_even_when_interleaved() {
    with_ctx(|ctx, _wt| {
        let target = config(&[("A", 8), ("B", 1)]);
        let mut outer =
            Outer::from_mechanisms(vec![Box::new(Offer(target)), Box::new(Hint)], &spec());
        // Two experiments in flight (parallel workers): 1 uses the offer, 2 the hint.
        let first = outer.propose(&mut KnobsProposer::default(), ctx).unwrap();
        assert_eq!(first.source.as_deref(), Some("offer"));
        let ctx2 = ProposeContext { n: 2, ..*ctx };
        let second = outer.propose(&mut KnobsProposer::default(), &ctx2).unwrap();
        assert_eq!(second.source, None);
        let rec = |n: u64, status: Status| ExperimentRecord {
            n,
            status: Some(status),
            objective: Some(0.5),
            ..Default::default()
        };
        let mut history = ctx.history.to_vec();
        history.push(rec(1, Status::Keep));
        outer.after(&history[1], &history);
        history.push(rec(2, Status::Discard));
        outer.after(&history[2], &history);
        assert_eq!(outer.tally.get("offer"), Some(&(1, 1)));
        assert_eq!(outer.tally.get("hint"), Some(&(1, 0)));
        assert!(outer.shaped.is_empty());
        // A cancelled experiment is nobody's failure.
        let ctx3 = ProposeContext { n: 3, ..*ctx };
        outer.propose(&mut KnobsProposer::default(), &ctx3).unwrap();
        history.push(rec(3, Status::Aborted));
        outer.after(&history[3], &history);
        assert_eq!(outer.tally.get("hint"), Some(&(1, 0)));
    });
}

/// Offers a configuration of its own for every experiment; for #2 the baseline's, which
/// the optimizer does not repeat (so it is offered but not proposed).
struct Every;

impl Mechanism for Every {
    fn name(&self) -> &str {
        "every"
    }
    fn candidates(&mut self, view: &View<'_>) -> Vec<Config> {
        let (a, b) = match view.n {
            2 => (3, 3),
            n => (n % 9 + 1, n / 9 + 1),
        };
        vec![config(&[("A", a as i64), ("B", b as i64)])]
    }
}

#[test]
fn a_resumed_portfolio_is_rebuilt_from_the_recorded_calls() {
    with_ctx(|ctx, _wt| {
        let spec = Spec::parse(
            Path::new("hone.toml"),
            "[loop]\neditable = [\"p.txt\"]\n[verify]\ncommand = \"true\"\nmetric = \"m\"\n\
                 [outer]\nmechanisms = [\"tabu\"]\nportfolio = true\nsegment = 3\n",
        )
        .unwrap();
        let make = || Outer::from_mechanisms(vec![Box::new(Every), Box::new(Hint)], &spec);
        let mut outer = make();
        let mut history = ctx.history.to_vec();
        let mut calls = Vec::new();
        let mut clock = 0.0;
        // Experiments 1..=10: segments end at 2, 5 and 8; #7 and #8 are in flight together
        // and #8 (a segment end) finishes first; 9 and 10 are the segment in progress
        // when the session stops.
        let batches: [&[u64]; 9] = [&[1], &[2], &[3], &[4], &[5], &[6], &[7, 8], &[9], &[10]];
        for batch in batches {
            for &n in batch {
                let c = ProposeContext {
                    n,
                    history: &history,
                    ..*ctx
                };
                outer.propose(&mut KnobsProposer::default(), &c).unwrap();
            }
            for &n in batch.iter().rev() {
                let status = kept_if(n % 4 == 1 || n == 6 || n == 7);
                clock += 1.0;
                history.push(ExperimentRecord {
                    n,
                    status: Some(status),
                    objective: Some(1.0 / n as f64),
                    finished_at: Some(clock),
                    ..Default::default()
                });
                outer.after(&history[history.len() - 1], &history);
                calls.extend(outer.take_calls());
            }
        }
        let offered: Vec<&MechanismCall> = calls
            .iter()
            .filter(|c| c.experiment == 2 && c.mechanism == "every" && c.hook == Hook::Candidates)
            .collect();
        assert!(
            offered[0].detail.ends_with("none was proposed"),
            "{offered:?}"
        );
        assert_eq!(outer.active().len(), 1, "one of the two runs per segment");
        assert!(!outer.tally.is_empty());
        // A new session over the same record (read back in experiment order) picks up
        // where the last one stopped...
        history.sort_by_key(|e| e.n);
        let mut resumed = make();
        resumed.restore(&calls, &history);
        assert_eq!(resumed.active(), outer.active());
        assert_eq!(resumed.tally, outer.tally);
        assert_eq!(
            format!("{:?}", resumed.portfolio),
            format!("{:?}", outer.portfolio)
        );
        let restored = resumed.take_calls();
        assert_eq!(restored.len(), 1);
        assert_eq!(restored[0].mechanism, "portfolio");
        assert!(
            restored[0].detail.contains("3 segment(s) credited"),
            "{}",
            restored[0].detail
        );
        // ...where one that did not restore would start with both on and no credit.
        let fresh = make();
        assert_ne!(fresh.active(), outer.active());
    });
}

#[test]
fn a_modified_knob_proposal_is_the_one_written_and_recorded() {
    with_ctx(|ctx, wt| {
        let target = config(&[("A", 8), ("B", 1)]);
        let mut outer = Outer::from_mechanisms(
            vec![Box::new(Steer {
                target: target.clone(),
            })],
            &spec(),
        );
        let p = outer.propose(&mut KnobsProposer::default(), ctx).unwrap();
        assert_eq!(p.config, serde_json::to_value(&target).ok());
        assert_eq!(p.source.as_deref(), Some("steer"));
        let written = std::fs::read_to_string(wt.join("p.txt")).unwrap();
        assert!(
            written.starts_with("A = 8  #") && written.contains("\nB = 1  #"),
            "{written}"
        );
        let calls = outer.take_calls();
        let effects: Vec<&str> = calls
            .iter()
            .filter(|c| c.hook == Hook::Filter)
            .map(|c| c.effect.as_str())
            .collect();
        assert_eq!(effects, ["modified", "none"]);
    });
}

#[test]
fn a_script_that_throws_is_deactivated_on_record_and_the_proposal_goes_on() {
    with_ctx(|ctx, _wt| {
        let script = super::super::script::ScriptMechanism::compile(
            "fn before_propose(v) { throw \"no idea\" }",
            super::super::script::Limits::default(),
        )
        .unwrap();
        let mut outer = Outer::from_mechanisms(vec![Box::new(script)], &spec());
        let name = outer.active()[0].clone();
        assert!(name.starts_with("script:"), "{name}");
        assert!(outer.propose(&mut KnobsProposer::default(), ctx).is_ok());
        assert!(outer.active().is_empty(), "deactivated");
        let calls = outer.take_calls();
        let stop = calls
            .iter()
            .find(|c| c.effect == Effect::Deactivated)
            .expect("the stop is on record");
        assert_eq!(
            (stop.mechanism.as_str(), stop.hook.as_str()),
            (name.as_str(), "before_propose")
        );
        assert!(stop.detail.contains("threw `no idea`"), "{}", stop.detail);
        assert!(outer.take_events()[0].1.contains("stopped and deactivated"));
        // Not called again.
        assert!(outer.propose(&mut KnobsProposer::default(), ctx).is_ok());
        assert!(outer.take_calls().iter().all(|c| c.mechanism != name));
    });
}

#[test]
fn when_every_knob_proposal_is_rejected_the_experiment_is_rejected_and_the_worktree_clean() {
    with_ctx(|ctx, wt| {
        let mut outer = Outer::from_mechanisms(vec![Box::new(Wall)], &spec());
        match outer.propose(&mut KnobsProposer::default(), ctx) {
            Err(ProposeError::Rejected(why)) => {
                assert!(why.starts_with("mechanism `wall`: nothing passes"), "{why}")
            }
            other => panic!("{other:?}"),
        }
        let rejected = outer
            .take_calls()
            .iter()
            .filter(|c| c.effect == Effect::Rejected)
            .count();
        assert_eq!(rejected, MAX_RESAMPLES, "each resample is on record");
        let left = std::fs::read_to_string(wt.join("p.txt")).unwrap();
        assert!(left.starts_with("A = 3  #"), "{left}");
    });
}
