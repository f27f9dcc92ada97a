//! Level 2 script mechanisms: a [`Mechanism`] written in Rhai and run in a sandbox.
//!
//! The sandbox is a raw Rhai engine with only the language core, arithmetic, logic, strings,
//! arrays, maps and maths registered: no file, network or time access, no `import`, no `eval`,
//! and no randomness but the seeded `rand_unit(seed, i)`. Every hook call is capped in
//! operations, call depth, string, array and map sizes, and wall-clock time (a deadline checked
//! on the engine's progress callback).
//!
//! A script implements any subset of the hooks as plain functions over plain data (see
//! [`INTERFACE`], which is also what the research rounds show the model). What a hook returns
//! is converted to hone's typed values and validated: an unknown knob, a wrong type or a value
//! out of range is an error. A script whose hook fails in any way (a cap, the deadline, a
//! `throw`, a wrong return type) is stopped: [`ScriptMechanism`] reports the fault through
//! [`Mechanism::fault`] and the outer loop deactivates it with the reason on record.
//!
//! The parts: [`sandbox`] (the Rhai engine and its caps, nothing of hone's), [`data`] (hone's
//! data as the script's maps), [`answers`] (its answers checked into typed values),
//! [`mechanism`] (the [`Mechanism`] adapter) and [`checks`] (the contract and the replay).
//!
//! [`Mechanism`]: super::Mechanism
//! [`Mechanism::fault`]: super::Mechanism::fault

pub mod answers;
pub mod checks;
pub mod data;
pub mod mechanism;
/// The Rhai sandbox itself lives with hone's other containment (`crate::sandbox`).
pub use crate::sandbox::script as sandbox;

pub use answers::{checked_config, to_candidates, to_change, to_guidance, to_verdict};
pub use checks::{contract, replay, ContractReport, Replay};
pub use data::{history_array, view_map};
pub use mechanism::ScriptMechanism;
pub use sandbox::{Limits, Script, HOOKS};

/// The mechanism interface as documented for a script's author (and the research rounds).
pub const INTERFACE: &str = r#"A mechanism is a Rhai script defining any subset of these functions:

  fn on_start(view)               -> () or a string saying what changed in its state
  fn before_propose(view)         -> () or #{ text: "advice" or ["advice", ...],
                                      focus: ["KNOB" or "path", ...], frozen: ["KNOB", ...],
                                      step_scale: 0.05..20.0, mode: "explore" | "exploit" }
  fn candidates(view)             -> [ #{ KNOB: value, ... }, ... ]   (knobs proposer only;
                                      knobs left out keep the best configuration's value)
  fn filter(proposal, view)       -> () or true (accept) | false or #{ reject: "reason" }
                                      | #{ modify: #{ KNOB: value, ... }, reason: "why" }
  fn on_result(outcome, view)     -> () or a string saying what changed
  fn on_segment_end(view)         -> () or a string saying what changed

Data (plain maps and arrays):
  view     = #{ n: next experiment number, seed: the run's seed (integer),
                direction: "minimize" | "maximize", knobs_proposer: bool,
                knobs: [ #{ name, kind: "float"|"int"|"bool"|"choice"|"fixed",
                            lo, hi, choices: [...], value } ],
                history: [ experiment, ... ] (oldest first, the baseline first),
                best: experiment or () }
  experiment = #{ n, status: "baseline"|"keep"|"discard"|"crash"|"rejected"|...,
                  metric: float or (), delta: metric minus the best before it, or (),
                  config: #{ KNOB: value } or (), description: string }
  proposal = #{ description, config: #{ KNOB: value } or (), diff: string or () }
  outcome  = the experiment just recorded

State: `this` is a map kept between calls (write `this.count = 1;`); code outside the
functions is never run.
Randomness: only `rand_unit(view.seed, i)` (a float in [0, 1), the same for the same inputs).
Limits per call: operations, call depth, string/array/map sizes and a wall-clock deadline;
breaking one, throwing, or returning the wrong shape deactivates the mechanism.
No file, network, time or import; print goes nowhere."#;

/// A seeded draw in [0, 1) (splitmix64 of the seed and the index).
fn rand_unit(seed: i64, i: i64) -> f64 {
    super::Rng::new(seed as u64, i as u64).unit()
}

/// Compiles `source` in a fresh sandbox with hone's seeded `rand_unit` registered: how
/// every script that runs is compiled.
pub fn compile(source: &str, limits: Limits) -> Result<Script, String> {
    Script::compile_with(source, limits, |e| {
        e.register_fn("rand_unit", rand_unit);
    })
}

/// The SHA-256 of a script's text, in hex.
pub fn hash(source: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(source.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::testing::{config, exp, knobs, view};
    use super::super::{Candidate, Mechanism, Mode, Outcome, Verdict};
    use super::*;
    use crate::propose::knobs::KnobValue;
    use crate::store::ExperimentRecord;
    use crate::store::Status;
    use rhai::Dynamic;
    use std::time::Duration;

    fn limits() -> Limits {
        Limits {
            deadline: Duration::from_secs(10),
            ..Limits::default()
        }
    }

    fn call_err(src: &str, limits: Limits) -> String {
        let mut s = Script::compile(src, limits).unwrap();
        s.call("on_start", vec![Dynamic::UNIT]).unwrap_err()
    }

    #[test]
    fn an_endless_loop_hits_the_deadline_when_operations_are_plenty() {
        let e = call_err(
            "fn on_start(v) { let x = 0; loop { x += 1; } }",
            Limits {
                operations: u64::MAX,
                deadline: Duration::from_millis(50),
                ..Limits::default()
            },
        );
        assert!(e.contains("deadline of 50 ms"), "{e}");
    }

    /// A script past a cap is stopped with an error naming the cap: the script, what it hits.
    #[test]
    fn endless_loops_recursion_and_growth_hit_their_caps() {
        let cases = [
            ("fn on_start(v) { loop { } }", "operations"),
            (
                "fn deeper(i) { deeper(i + 1) } fn on_start(v) { deeper(0) }",
                "nested calls",
            ),
            ("fn on_start(v) { let s = \"x\"; loop { s += s; } }", "size cap"),
            ("fn on_start(v) { let a = []; loop { a.push(1); } }", "size cap"),
            // One allocation past the cap is refused.
            ("fn on_start(v) { let a = []; a.pad(100000000, 0); }", "size cap"),
            (
                "fn on_start(v) { let m = #{}; let i = 0; loop { let one = #{}; one[`k${i}`] = i; m += one; i += 1; } }",
                "size cap",
            ),
        ];
        for (src, want) in cases {
            let e = call_err(src, limits());
            assert!(e.contains(want), "{src}: {e}");
        }
    }

    #[test]
    fn a_throw_is_an_error_and_the_sandbox_has_no_eval_or_time() {
        let e = call_err("fn on_start(v) { throw \"boom\" }", limits());
        assert!(e.contains("threw `boom`"), "{e}");
        assert!(Script::compile("fn on_start(v) { eval(\"1\") }", limits()).is_err());
        let e = call_err("fn on_start(v) { timestamp() }", limits());
        assert!(e.contains("timestamp"), "{e}");
        assert!(Script::compile("import \"x\" as y; fn on_start(v) {}", limits()).is_err());
    }

    #[test]
    fn the_sandbox_alone_compiles_what_hone_compiles_and_only_hone_runs_rand_unit() {
        let src = "fn before_propose(v) { if rand_unit(v.seed, v.n) < 2.0 { () } else { () } }";
        let view = Dynamic::from_map(
            [
                ("seed".into(), Dynamic::from(1_i64)),
                ("n".into(), Dynamic::from(2_i64)),
            ]
            .into_iter()
            .collect(),
        );
        let mut bare = Script::compile(src, limits()).unwrap();
        let e = bare.call("before_propose", vec![view.clone()]).unwrap_err();
        assert!(e.contains("rand_unit"), "{e}");
        let mut full = compile(src, limits()).unwrap();
        assert!(full.call("before_propose", vec![view]).unwrap().is_unit());
        assert_eq!(
            Script::compile("fn f(", limits()).err(),
            compile("fn f(", limits()).err()
        );
    }

    #[test]
    fn compile_refuses_scripts_without_hooks_or_with_a_wrong_arity() {
        let e = Script::compile("fn helper(x) { x }", limits())
            .err()
            .unwrap();
        assert!(e.contains("none of the hooks"), "{e}");
        let e = Script::compile("fn filter(p) { () }", limits())
            .err()
            .unwrap();
        assert!(e.contains("`filter` must take 2"), "{e}");
        let e = Script::compile("fn on_start(v) { let }", limits())
            .err()
            .unwrap();
        assert!(e.contains("line 1"), "{e}");
        // Too long to compile (a model's script of 20,000 variables took minutes): refused
        // before the parser sees it; one just under the limit compiles.
        let body = |n: usize| {
            (0..n)
                .map(|i| format!("let a{i} = {i}; "))
                .collect::<String>()
        };
        let long = format!("fn on_start(v) {{ {} () }}", body(2500));
        let e = Script::compile(&long, limits()).err().unwrap();
        assert!(e.contains("at most 32768 bytes"), "{e}");
        let fits = format!("fn on_start(v) {{ {} () }}", body(1500));
        assert!(fits.len() <= 32 * 1024);
        assert!(Script::compile(&fits, limits()).is_ok());
    }

    #[test]
    fn returned_values_are_checked_against_the_knobs() {
        let k = knobs("A = 3  # hone: int 1..9\nLR = 0.1  # hone: 0.001..1.0\n");
        let base = config(&[("A", 3)]);
        let v = |src: &str| {
            let mut s = Script::compile(&format!("fn on_start(v) {{ {src} }}"), limits()).unwrap();
            s.call("on_start", vec![Dynamic::UNIT]).unwrap()
        };
        assert_eq!(
            to_verdict(&v("#{ modify: #{ A: 5 }, reason: \"r\" }"), &k, &base),
            Ok(Verdict::Modify(config(&[("A", 5)]), "r".into()))
        );
        let e = to_verdict(&v("#{ modify: #{ B: 5 } }"), &k, &base).unwrap_err();
        assert!(e.contains("`B` is not a knob"), "{e}");
        let e = to_verdict(&v("#{ modify: #{ A: 50 } }"), &k, &base).unwrap_err();
        assert!(e.contains("integer in 1..9"), "{e}");
        let e = to_verdict(&v("#{ modify: #{ A: \"5\" } }"), &k, &base).unwrap_err();
        assert!(e.contains("a string"), "{e}");
        let e = to_verdict(&v("42"), &k, &base).unwrap_err();
        assert!(e.contains("must be a map"), "{e}");
        assert_eq!(
            to_verdict(&v("#{ reject: \"no\" }"), &k, &base),
            Ok(Verdict::Reject("no".into()))
        );
        let g = to_guidance(
            &v("#{ mode: \"explore\", step_scale: 2, frozen: [\"LR\"] }"),
            &k,
        )
        .unwrap();
        assert_eq!(
            (g.mode, g.step_scale, g.frozen),
            (Some(Mode::Explore), Some(2.0), vec!["LR".to_string()])
        );
        let e = to_guidance(&v("#{ mode: \"wander\" }"), &k).unwrap_err();
        assert!(e.contains("`mode`"), "{e}");
        let e = to_guidance(&v("#{ step: 2 }"), &k).unwrap_err();
        assert!(e.contains("unknown key `step`"), "{e}");
        let e = to_guidance(&v("#{ step_scale: 100.0 }"), &k).unwrap_err();
        assert!(e.contains("0.05..20.0"), "{e}");
        let c = to_candidates(&v("[#{ LR: 0.5 }]"), &k, &base).unwrap();
        assert_eq!(c[0].get("LR"), Some(&KnobValue::Float(0.5)));
        assert_eq!(c[0].get("A"), Some(&KnobValue::Int(3)));
        assert!(to_change(&v("3"), "on_result").is_err());
    }

    #[test]
    fn a_failing_hook_deactivates_the_mechanism_once_with_its_reason() {
        let mut m = ScriptMechanism::compile("fn filter(p, v) { 42 }", limits()).unwrap();
        let k = knobs("A = 3  # hone: int 1..9\n");
        let h = vec![exp(
            0,
            Status::Baseline,
            Some(1.0),
            Some(&config(&[("A", 3)])),
        )];
        let ed: Vec<String> = Vec::new();
        let view = view(&h, &k, &ed);
        let cand = Candidate {
            description: "x",
            config: None,
            diff: None,
        };
        assert_eq!(m.filter(&cand, &view), Verdict::Accept);
        let f = m.fault().unwrap();
        assert!(
            f.starts_with("`filter`: `filter` returned a bad value"),
            "{f}"
        );
        assert_eq!(m.filter(&cand, &view), Verdict::Accept);
        assert_eq!(m.fault(), None, "stopped: not called again");
    }

    #[test]
    fn the_contract_checks_determinism_given_the_seed() {
        let k = knobs("A = 3  # hone: int 1..9\n");
        let good = "fn before_propose(v) { if rand_unit(v.seed, v.n) < 0.5 { #{ mode: \"explore\" } } else { () } }";
        assert!(contract(good, limits(), &k).is_ok());
        // State kept in `this` is fine: each pass starts from a fresh state.
        let stateful =
            "fn before_propose(v) { this.c = (this.c ?? 0) + 1; #{ text: `call ${this.c}` } }";
        assert!(contract(stateful, limits(), &k).is_ok());
        let bad = "fn candidates(v) { [#{ A: 99 }] }";
        let e = contract(bad, limits(), &k).unwrap_err();
        assert!(e.contains("integer in 1..9"), "{e}");
        let slow = "fn on_segment_end(v) { loop {} }";
        let e = contract(slow, limits(), &k).unwrap_err();
        assert!(e.contains("operations"), "{e}");
    }

    #[test]
    fn the_script_sees_the_history_as_plain_data() {
        let k = knobs("A = 3  # hone: int 1..9\n");
        let h = vec![
            exp(0, Status::Baseline, Some(1.0), Some(&config(&[("A", 3)]))),
            exp(1, Status::Discard, Some(1.5), Some(&config(&[("A", 4)]))),
        ];
        let ed: Vec<String> = Vec::new();
        let view = view(&h, &k, &ed);
        let src = "fn before_propose(v) { let e = v.history[1]; #{ text: `${e.n} ${e.status} ${e.delta} ${e.config.A} ${v.knobs[0].hi} ${v.best.n}` } }";
        let mut m = ScriptMechanism::compile(src, limits()).unwrap();
        assert_eq!(m.before_propose(&view).text, vec!["1 discard 0.5 4 9 0"]);
        let src = "fn on_result(o, v) { `#${o.n} ${o.status} delta ${o.delta}` }";
        let mut m = ScriptMechanism::compile(src, limits()).unwrap();
        let outcome = Outcome {
            record: &h[1],
            view,
        };
        assert_eq!(
            m.on_result(&outcome).as_deref(),
            Some("#1 discard delta 0.5")
        );
    }

    #[test]
    fn the_readme_example_passes_the_contract_and_does_what_it_says() {
        let src = include_str!("../../../../examples/mechanisms/stall.rhai");
        let k = knobs("A = 3  # hone: int 1..9\n");
        assert!(contract(src, limits(), &k).is_ok());
        let mut h = vec![exp(
            0,
            Status::Baseline,
            Some(1.0),
            Some(&config(&[("A", 3)])),
        )];
        for n in 1..6 {
            h.push(exp(
                n,
                Status::Discard,
                Some(2.0),
                Some(&config(&[("A", n as i64 + 3)])),
            ));
        }
        let ed: Vec<String> = Vec::new();
        let view = view(&h, &k, &ed);
        let mut m = ScriptMechanism::compile(src, limits()).unwrap();
        let g = m.before_propose(&view);
        assert_eq!((g.mode, g.step_scale), (Some(Mode::Explore), Some(2.0)));
        let again = config(&[("A", 5)]);
        let cand = Candidate {
            description: "A 3 -> 5",
            config: Some(&again),
            diff: None,
        };
        assert_eq!(
            m.filter(&cand, &view),
            Verdict::Reject("the same configuration was discarded in #2".into())
        );
        let fresh = config(&[("A", 1)]);
        let cand = Candidate {
            config: Some(&fresh),
            ..cand
        };
        assert_eq!(m.filter(&cand, &view), Verdict::Accept);
    }

    #[test]
    fn replay_counts_what_the_filter_would_have_rejected() {
        let k = knobs("A = 3  # hone: int 1..9\n");
        let h: Vec<ExperimentRecord> = (0..6)
            .map(|n| {
                exp(
                    n,
                    if n == 0 {
                        Status::Baseline
                    } else {
                        Status::Discard
                    },
                    Some(1.0),
                    Some(&config(&[("A", n as i64 + 1)])),
                )
            })
            .collect();
        let src = "fn filter(p, v) { if p.config.A > 4 { #{ reject: \"too big\" } } else { () } }";
        let r = replay(src, limits(), &view(&h, &k, &[])).unwrap();
        assert_eq!((r.proposals, r.rejected, r.modified), (5, 2, 0));
    }
}
