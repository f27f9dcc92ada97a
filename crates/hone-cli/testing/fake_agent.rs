//! A scripted stand-in for a coding agent, used by hone's integration tests (like jj's fake
//! editor). `fake-agent SCRIPT` runs one block of SCRIPT (blocks are separated by lines
//! `---`): block n-1 for experiment n (`HONE_EXPERIMENT`), or, outside hone, the next one as
//! counted in `SCRIPT.count`; past the end, the last block repeats. Each line of a block is a tab-separated command, run in the working directory:
//!
//! - `write<TAB>PATH<TAB>TEXT`: write TEXT (`\n` escapes allowed) to PATH, creating directories
//! - `replace<TAB>PATH<TAB>OLD<TAB>NEW`: replace the first OLD in PATH with NEW (exit 3 if absent)
//! - `delete<TAB>PATH`
//! - `hypothesis<TAB>TEXT`: write `.hone/hypothesis.txt`
//! - `say<TAB>TEXT`: print TEXT on stdout
//! - `expect-prompt<TAB>TEXT`: exit 4 unless the prompt file ($HONE_PROMPT) contains TEXT
//! - `forbid-prompt<TAB>TEXT`: exit 4 if the prompt file contains TEXT
//! - `run<TAB>COMMAND`: run COMMAND with `sh -c` (exit 5 if it fails)
//! - `mark<TAB>PATH`: write this process's group id to PATH (a test's cue that the agent runs)
//! - `sleep<TAB>SECONDS`
//! - `exit<TAB>CODE`

use std::path::Path;

fn unescape(s: &str) -> String {
    s.replace("\\n", "\n").replace("\\t", "\t")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(script) = args.next() else {
        eprintln!("usage: fake-agent SCRIPT");
        std::process::exit(2);
    };
    let text = std::fs::read_to_string(&script).unwrap_or_else(|e| {
        eprintln!("fake-agent: cannot read {script}: {e}");
        std::process::exit(2);
    });
    let blocks: Vec<&str> = text.split("\n---\n").collect();
    // Experiment n runs block n-1 (hone numbers candidates from 1). Without HONE_EXPERIMENT a
    // counter file beside the script says which block is next.
    let i = match std::env::var("HONE_EXPERIMENT")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
    {
        Some(n) => n.saturating_sub(1),
        None => {
            let counter = format!("{script}.count");
            let i: usize = std::fs::read_to_string(&counter)
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(0);
            if let Err(e) = std::fs::write(&counter, (i + 1).to_string()) {
                eprintln!("fake-agent: cannot write {counter}: {e}");
                std::process::exit(2);
            }
            i
        }
    };
    let block = blocks[i.min(blocks.len() - 1)];
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let f: Vec<&str> = line.split('\t').collect();
        match f.as_slice() {
            ["write", path, text] => {
                if let Some(parent) = Path::new(path).parent() {
                    let _ = std::fs::create_dir_all(parent);
                }
                if let Err(e) = std::fs::write(path, unescape(text)) {
                    eprintln!("fake-agent: cannot write {path}: {e}");
                    std::process::exit(3);
                }
            }
            ["replace", path, old, new] => {
                let content = std::fs::read_to_string(path).unwrap_or_default();
                let old = unescape(old);
                if !content.contains(&old) {
                    eprintln!("fake-agent: {old:?} not found in {path}");
                    std::process::exit(3);
                }
                let _ = std::fs::write(path, content.replacen(&old, &unescape(new), 1));
            }
            ["delete", path] => {
                let _ = std::fs::remove_file(path);
            }
            ["hypothesis", text] => {
                let _ = std::fs::create_dir_all(".hone");
                let _ = std::fs::write(".hone/hypothesis.txt", unescape(text));
            }
            ["say", text] => println!("{}", unescape(text)),
            ["expect-prompt", needle] => {
                let prompt = std::env::var("HONE_PROMPT").unwrap_or_default();
                let content = std::fs::read_to_string(&prompt).unwrap_or_default();
                if !content.contains(&unescape(needle)) {
                    eprintln!("fake-agent: prompt {prompt} lacks {needle:?}");
                    std::process::exit(4);
                }
            }
            ["forbid-prompt", needle] => {
                let prompt = std::env::var("HONE_PROMPT").unwrap_or_default();
                let content = std::fs::read_to_string(&prompt).unwrap_or_default();
                if content.contains(&unescape(needle)) {
                    eprintln!("fake-agent: prompt {prompt} shows {needle:?}");
                    std::process::exit(4);
                }
            }
            ["run", command] => {
                let ok = std::process::Command::new("sh")
                    .arg("-c")
                    .arg(unescape(command))
                    .status()
                    .map(|s| s.success())
                    .unwrap_or(false);
                if !ok {
                    eprintln!("fake-agent: `{command}` failed");
                    std::process::exit(5);
                }
            }
            ["mark", path] => {
                // SAFETY: getpgrp has no preconditions.
                let pgid = unsafe { libc::getpgrp() };
                // Written whole, then renamed: a test that sees the file sees the number.
                let tmp = format!("{path}.tmp");
                if std::fs::write(&tmp, format!("{pgid}\n")).is_ok() {
                    let _ = std::fs::rename(&tmp, path);
                }
            }
            ["sleep", secs] => {
                std::thread::sleep(std::time::Duration::from_secs(secs.parse().unwrap_or(1)));
            }
            ["exit", code] => std::process::exit(code.parse().unwrap_or(1)),
            other => {
                eprintln!("fake-agent: bad script line {other:?}");
                std::process::exit(2);
            }
        }
    }
}
