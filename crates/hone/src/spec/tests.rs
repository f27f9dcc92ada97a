//! Tests of whole specs: the design example, errors that name file:line:key, sections and keys
//! in the wrong place, and the serialized form each run stores. Each section's own rules are
//! tested in its module; this module also holds the fixtures they share.
use std::path::Path;
use std::time::Duration;

use super::*;

pub(super) const GOOD: &str = r#"
[loop]
program   = "program.md"
editable  = ["train.py"]
protected = ["prepare.py"]
pinned    = ["data/"]

[verify]
command   = "python3 train.py"
timeout   = "6m"
metric    = "val_bpb"
direction = "minimize"
min_delta = 0.0005

[agent]
kind = "knobs"

[stop]
max_experiments = 100
max_time = "8h"
patience = 30
max_cost_usd = 20
"#;

pub(super) fn parse(text: &str) -> Result<Spec, SpecError> {
    Spec::parse(Path::new("hone.toml"), text)
}

#[test]
fn parses_the_design_example() {
    let s = parse(GOOD).unwrap();
    assert_eq!(s.loop_.editable, vec!["train.py"]);
    assert_eq!(s.verify.timeout, Duration::from_secs(360));
    assert_eq!(s.verify.kill_grace, Duration::from_secs(5));
    assert_eq!(s.verify.direction, Direction::Minimize);
    assert_eq!(s.stop.max_time, Some(Duration::from_secs(8 * 3600)));
    assert_eq!(s.stop.patience, Some(30));
    assert_eq!(s.stop.max_consecutive_failures, 10);
    assert_eq!(s.agent.kind, AgentKind::Knobs);
}

/// A spec that sets a key of every section (for the serialized-form test).
pub(super) const EVERY: &str = r#"
[loop]
program = "prog.md"
notes = "NOTES.md"
skills = ["skills/a.md"]
editable = ["train.py", "model/*.py"]
protected = ["prepare.py"]
pinned = ["data/"]

[verify]
command = "python3 train.py"
timeout = "1h30m"
kill_grace = 2.5
metric = "val_bpb"
direction = "max"
min_delta = 0.001
constraints = ["peak_vram_mb<=40000.0", "  tokens_per_s >= 1e3 "]
metric_regex = "score (?P<value>[0-9.]+)"
max_log_bytes = 2048
env = { CUDA_VISIBLE_DEVICES = "0", B = "x" }
baseline_repeats = 3
noise_k = 1.5
confirm = 2
retest_every = 4
seed_env = "SEED"
prefer_simpler = true
evaluate = "python3 eval.py"
outputs = ["out/*.pt"]
holdout_gate = true

[verify.holdout]
command = "python3 holdout.py"
timeout = "2m"
hide = ["data/holdout"]

[agent]
kind = "openai"
model = "gpt-4.1-mini"
base_url = "http://localhost:8000/v1/"
api_key_env = "MY_KEY"
temperature = 0.7
max_tokens = 2000
request_timeout = "30s"
max_attempts = 0
edit_mode = "patch"
timeout = "10m"
seed = 7

[stop]
max_experiments = 50
max_time = "2h"
patience = 5
target = 0.9
max_consecutive_failures = 3
max_cost_usd = 2.5
max_tokens = 100000

[sandbox]
kind = "bwrap"
memory = "8G"
cpu_time = "500ms"
max_output = "1M"
max_processes = 64
network = false
required = false

[review]
kind = "anthropic"
model = "claude-sonnet-4-20250514"
instructions = "REVIEW.md"
max_diff_lines = 200
forbid = ["TODO", "import os"]
timeout = "1m"

[exec]
backend = "slurm"
shared_dir = "/shared/hone"
partition = "gpu"
time = "2h"
workers = 2
slots = [{ CUDA_VISIBLE_DEVICES = "0" }, { CUDA_VISIBLE_DEVICES = "1" }]

[store]
url = "postgres://h@db/hone"
repo = "git@example.com:lab/p.git"

[outer]
mechanisms = ["tabu", "bandit"]
strategy_every = 5
max_frozen = 3
segment = 8
portfolio = true
probation = 6
research_every = 20

[[notify]]
url = "https://hooks.example/a"

[[schedule]]
cron = "0 2 * * *"

[trigger]
secret_env = "S"
"#;

/// The JSON each run stores (`serde_json::to_string(&spec)`) and the CLI and dashboard
/// read back by key: it must not change, byte for byte.
#[test]
fn serialized_form_is_unchanged() {
    let json = |text: &str| serde_json::to_string(&parse(text).unwrap()).unwrap();
    assert_eq!(json(GOOD), GOOD_JSON);
    assert_eq!(json(MIN), MIN_JSON);
    assert_eq!(json(EVERY), EVERY_JSON);
    let workers = format!(
        "{MIN}[exec]\nbackend = \"workers\"\nremote = \"git@h:r.git\"\nlease = \"45s\"\n\
         [store]\nurl = \"postgres://db/h\"\n[agent]\nkind = \"claude\"\nmodel = \"opus\"\n\
         extra_args = [\"--x\"]\n"
    );
    assert_eq!(json(&workers), WORKERS_JSON);
}

const GOOD_JSON: &str = r#"{"loop":{"program":"program.md","notes":".hone/notes.md","skills":[],"editable":["train.py"],"protected":["prepare.py"],"pinned":["data/"]},"verify":{"command":"python3 train.py","timeout":360.0,"kill_grace":5.0,"metric":"val_bpb","direction":"minimize","min_delta":0.0005,"constraints":[],"metric_regex":null,"max_log_bytes":1000000,"env":[],"baseline_repeats":1,"noise_k":2.0,"confirm":0,"retest_every":null,"seed_env":null,"prefer_simpler":false,"evaluate":null,"outputs":[],"holdout":null,"holdout_gate":false},"agent":{"kind":"knobs","command":null,"timeout":1800.0,"seed":null,"llm":null,"model":null,"extra_args":[]},"stop":{"max_experiments":100,"max_time":28800.0,"patience":30,"target":null,"max_consecutive_failures":10,"max_cost_usd":20.0,"max_tokens":null},"sandbox":{"bwrap":false,"network":true,"required":true,"memory_bytes":null,"cpu_seconds":null,"max_output_bytes":null,"max_processes":null},"review":{"command":null,"kind":null,"llm":null,"instructions":null,"max_diff_lines":null,"forbid":[],"timeout":600.0},"exec":{"backend":"Local","shared_dir":null,"remote":null,"lease":30.0,"workers":1,"slots":[]},"outer":{"mechanisms":[],"strategy_every":null,"max_frozen":2,"segment":10,"portfolio":false,"probation":10,"research_every":null,"scripts":[]}}"#;
const MIN_JSON: &str = r#"{"loop":{"program":null,"notes":".hone/notes.md","skills":[],"editable":["a.py"],"protected":[],"pinned":[]},"verify":{"command":"x","timeout":600.0,"kill_grace":5.0,"metric":"m","direction":"minimize","min_delta":0.0,"constraints":[],"metric_regex":null,"max_log_bytes":1000000,"env":[],"baseline_repeats":1,"noise_k":2.0,"confirm":0,"retest_every":null,"seed_env":null,"prefer_simpler":false,"evaluate":null,"outputs":[],"holdout":null,"holdout_gate":false},"agent":{"kind":"knobs","command":null,"timeout":1800.0,"seed":null,"llm":null,"model":null,"extra_args":[]},"stop":{"max_experiments":100,"max_time":null,"patience":null,"target":null,"max_consecutive_failures":10,"max_cost_usd":null,"max_tokens":null},"sandbox":{"bwrap":false,"network":true,"required":true,"memory_bytes":null,"cpu_seconds":null,"max_output_bytes":null,"max_processes":null},"review":{"command":null,"kind":null,"llm":null,"instructions":null,"max_diff_lines":null,"forbid":[],"timeout":600.0},"exec":{"backend":"Local","shared_dir":null,"remote":null,"lease":30.0,"workers":1,"slots":[]},"outer":{"mechanisms":[],"strategy_every":null,"max_frozen":2,"segment":10,"portfolio":false,"probation":10,"research_every":null,"scripts":[]}}"#;
const EVERY_JSON: &str = r#"{"loop":{"program":"prog.md","notes":"NOTES.md","skills":["skills/a.md"],"editable":["train.py","model/*.py"],"protected":["prepare.py"],"pinned":["data/"]},"verify":{"command":"python3 train.py","timeout":5400.0,"kill_grace":2.5,"metric":"val_bpb","direction":"maximize","min_delta":0.001,"constraints":["peak_vram_mb<=40000.0","  tokens_per_s >= 1e3 "],"metric_regex":"score (?P<value>[0-9.]+)","max_log_bytes":2048,"env":[["CUDA_VISIBLE_DEVICES","0"],["B","x"]],"baseline_repeats":3,"noise_k":1.5,"confirm":2,"retest_every":4,"seed_env":"SEED","prefer_simpler":true,"evaluate":"python3 eval.py","outputs":["out/*.pt"],"holdout":{"command":"python3 holdout.py","metric":"val_bpb","timeout":120.0,"min_delta":0.001,"hide":["data/holdout"]},"holdout_gate":true},"agent":{"kind":"openai","command":null,"timeout":600.0,"seed":7,"llm":{"model":"gpt-4.1-mini","base_url":"http://localhost:8000/v1","api_key_env":"MY_KEY","temperature":0.7,"max_tokens":2000,"request_timeout":30.0,"max_attempts":1,"price_in_per_mtok":null,"price_out_per_mtok":null,"edit_mode":"patch"},"model":"gpt-4.1-mini","extra_args":[]},"stop":{"max_experiments":50,"max_time":7200.0,"patience":5,"target":0.9,"max_consecutive_failures":3,"max_cost_usd":2.5,"max_tokens":100000},"sandbox":{"bwrap":true,"network":false,"required":false,"memory_bytes":8589934592,"cpu_seconds":1,"max_output_bytes":1048576,"max_processes":64},"review":{"command":null,"kind":"anthropic","llm":{"model":"claude-sonnet-4-20250514","base_url":"https://api.anthropic.com","api_key_env":"ANTHROPIC_API_KEY","temperature":null,"max_tokens":4096,"request_timeout":120.0,"max_attempts":4,"price_in_per_mtok":null,"price_out_per_mtok":null,"edit_mode":"blocks"},"instructions":"REVIEW.md","max_diff_lines":200,"forbid":["TODO","import os"],"timeout":60.0},"exec":{"backend":"Slurm","shared_dir":"/shared/hone","remote":null,"lease":30.0,"workers":2,"slots":[[["CUDA_VISIBLE_DEVICES","0"]],[["CUDA_VISIBLE_DEVICES","1"]]]},"outer":{"mechanisms":["tabu","bandit"],"strategy_every":5,"max_frozen":3,"segment":8,"portfolio":true,"probation":6,"research_every":20,"scripts":[]}}"#;
const WORKERS_JSON: &str = r#"{"loop":{"program":null,"notes":".hone/notes.md","skills":[],"editable":["a.py"],"protected":[],"pinned":[]},"verify":{"command":"x","timeout":600.0,"kill_grace":5.0,"metric":"m","direction":"minimize","min_delta":0.0,"constraints":[],"metric_regex":null,"max_log_bytes":1000000,"env":[],"baseline_repeats":1,"noise_k":2.0,"confirm":0,"retest_every":null,"seed_env":null,"prefer_simpler":false,"evaluate":null,"outputs":[],"holdout":null,"holdout_gate":false},"agent":{"kind":"claude","command":null,"timeout":1800.0,"seed":null,"llm":null,"model":"opus","extra_args":["--x"]},"stop":{"max_experiments":100,"max_time":null,"patience":null,"target":null,"max_consecutive_failures":10,"max_cost_usd":null,"max_tokens":null},"sandbox":{"bwrap":false,"network":true,"required":true,"memory_bytes":null,"cpu_seconds":null,"max_output_bytes":null,"max_processes":null},"review":{"command":null,"kind":null,"llm":null,"instructions":null,"max_diff_lines":null,"forbid":[],"timeout":600.0},"exec":{"backend":"Workers","shared_dir":null,"remote":"git@h:r.git","lease":45.0,"workers":1,"slots":[]},"outer":{"mechanisms":[],"strategy_every":null,"max_frozen":2,"segment":10,"portfolio":false,"probation":10,"research_every":null,"scripts":[]}}"#;

pub(super) fn err(text: &str) -> SpecError {
    parse(text).unwrap_err()
}

impl SpecError {
    /// The error, checked to name `line` and `key` (a failure points at the caller).
    #[track_caller]
    pub(super) fn at(self, line: usize, key: &str) -> SpecError {
        assert_eq!((self.line, self.key.as_str()), (line, key), "{self}");
        self
    }
}

pub(super) const MIN: &str =
    "[loop]\neditable = [\"a.py\"]\n[verify]\ncommand = \"x\"\nmetric = \"m\"\n";

#[test]
fn notify_schedule_and_trigger_entries() {
    let s = parse(&format!(
        "{MIN}\n[[notify]]\nurl = \"https://hooks.example/a\"\non = [\"keep\", \"finish\"]\nformat = \"slack\"\n\n\
         [[notify]]\nurl_env = \"HOOK\"\nretries = 1\nbackoff = \"250ms\"\n\n\
         [[schedule]]\ncron = \"0 2 * * *\"\ntag = \"nightly\"\nmax_experiments = 30\ntime = \"1h\"\npr = true\ncatch_up = true\n\n\
         [trigger]\nsecret_env = \"MY_SECRET\"\n"
    ))
    .unwrap();
    assert_eq!(s.notify.len(), 2);
    assert_eq!(
        s.notify[0].url,
        NotifyUrl::Literal("https://hooks.example/a".into())
    );
    assert_eq!(s.notify[0].on, [NotifyOn::Keep, NotifyOn::Finish]);
    assert_eq!(s.notify[0].format, NotifyFormat::Slack);
    assert_eq!(s.notify[0].line, 7);
    assert_eq!(s.notify[1].url, NotifyUrl::Env("HOOK".into()));
    assert_eq!(s.notify[1].on, NotifyOn::ALL);
    assert_eq!(s.notify[1].format, NotifyFormat::Json);
    assert_eq!(s.notify[1].backoff, Duration::from_millis(250));
    let sc = &s.schedule[0];
    assert_eq!(
        (sc.cron.as_str(), sc.tag.as_str()),
        ("0 2 * * *", "nightly")
    );
    assert_eq!(sc.max_experiments, Some(30));
    assert_eq!(sc.time, Some(Duration::from_secs(3600)));
    assert!(sc.pr && sc.finalize && sc.catch_up && !sc.squash);
    assert_eq!(s.trigger.secret_env, "MY_SECRET");
    // Secrets never reach the run's stored spec.
    let json = serde_json::to_string(&s).unwrap();
    assert!(!json.contains("hooks.example"), "{json}");
    assert_eq!(
        parse(MIN).unwrap().trigger.secret_env,
        "HONE_WEBHOOK_SECRET"
    );
}

#[test]
fn automation_errors_name_the_line_and_key() {
    let refused = |extra: &str| err(&format!("{MIN}{extra}"));
    let e = refused("[[notify]]\nurl = \"https://h/x\"\non = [\"keeps\"]\n").at(8, "notify.on");
    assert!(e.message.contains("did you mean `keep`?"), "{e}");
    refused("[[notify]]\nurl = \"https://h/x\"\nformat = \"teams\"\n").at(8, "notify.format");
    refused("[[notify]]\nurl = \"ftp://h/x\"\n").at(7, "notify.url");
    refused("[[notify]]\non = [\"keep\"]\n").at(6, "notify.url");
    let e = refused("[[notify]]\nurl = \"https://h/x\"\nurl_env = \"X\"\n");
    assert_eq!(e.key, "notify.url_env");
    let e = refused("[[notify]]\nurl = \"https://h/x\"\nretires = 2\n").at(8, "notify.retires");
    assert!(e.message.contains("did you mean `retries`?"), "{e}");
    let e = refused("[notify]\nurl = \"https://h/x\"\n");
    assert!(e.message.contains("[[notify]]"), "{e}");
    let e = refused("[[schedule]]\ncron = \"0 25 * * *\"\n").at(7, "schedule.cron");
    assert!(e.message.contains("is not a cron expression"), "{e}");
    let e = refused("[[schedule]]\ntag = \"x\"\n");
    assert_eq!(e.key, "schedule.cron");
    refused("[[schedule]]\ncron = \"@daily\"\ntag = \"bad tag\"\n").at(8, "schedule.tag");
    let e = refused("[[schedule]]\ncron = \"@daily\"\nagent = \"gpt\"\n");
    assert_eq!(e.key, "schedule.agent");
    refused("[[schedule]]\ncron = \"@daily\"\ncatch_up = \"yes\"\n").at(8, "schedule.catch_up");
    let e = refused("[trigger]\nsecret = \"x\"\n");
    assert_eq!(e.key, "trigger.secret");
}

#[test]
fn unknown_key_names_line_and_suggests() {
    let t = GOOD.replace("timeout   = \"6m\"", "timout    = \"6m\"");
    let e = err(&t);
    assert_eq!(e.line, 10, "{e}");
    assert_eq!(e.key, "verify.timout");
    assert!(e.message.contains("did you mean `timeout`"), "{e}");
}

#[test]
fn another_tools_name_for_a_key_suggests_hones() {
    let t = GOOD.replace("patience = 30", "patience = 30\nn_trials = 40");
    let e = err(&t);
    assert_eq!(e.key, "stop.n_trials");
    assert!(e.message.contains("did you mean `max_experiments`"), "{e}");
}

#[test]
fn unknown_section_suggests() {
    let e = err(&format!("{GOOD}\n[stpo]\nx = 1\n"));
    assert_eq!(e.line, 24, "{e}");
    assert!(e.message.contains("did you mean `stop`"), "{e}");
}

#[test]
fn wrong_type_names_value_line() {
    let e = err(&GOOD.replace("patience = 30", "patience = \"thirty\"")).at(21, "stop.patience");
    assert!(e.message.contains("expected a whole number"), "{e}");
}

#[test]
fn missing_required_key() {
    err(&GOOD.replace("metric    = \"val_bpb\"\n", "")).at(8, "verify.metric");
    let e = err("[loop]\neditable = [\"a\"]\n");
    assert_eq!(e.key, "verify.command");
    assert!(e.message.contains("section is missing"), "{e}");
}

#[test]
fn contradictions() {
    err(&GOOD.replace("protected = [\"prepare.py\"]", "protected = [\"train.py\"]"))
        .at(5, "loop.protected");
    let e = err(&GOOD.replace("kind = \"knobs\"", "kind = \"command\""));
    assert_eq!(e.key, "agent.command", "{e}");
    err(&GOOD.replace("min_delta = 0.0005", "min_delta = -1")).at(13, "verify.min_delta");
}

#[test]
fn bad_duration_and_direction() {
    err(&GOOD.replace("\"6m\"", "\"six minutes\"")).at(10, "verify.timeout");
    err(&GOOD.replace("\"minimize\"", "\"down\"")).at(12, "verify.direction");
}

/// Each of `values` for `[stop] key` is refused on its line, the message saying `says`.
fn stop_values_refused(key: &str, values: &[&str], says: &str) {
    for value in values {
        let e = err(&format!("{MIN}[stop]\n{key} = {value}\n"));
        let stop_key = format!("stop.{key}");
        assert_eq!((e.line, &e.key), (7, &stop_key), "{value}: {e}");
        assert!(e.message.contains(says), "{value}: {e}");
    }
}

#[test]
fn huge_durations_are_spec_errors_with_their_line() {
    let huge = ["1e300", "\"1e20\"", "\"18446744073709551615s\"", "1e20"];
    stop_values_refused("max_time", &huge, "too long");
}

#[test]
fn toml_syntax_error_has_line() {
    let e = err(&GOOD.replace("patience = 30", "patience = = 30"));
    assert_eq!(e.line, 21, "{e}");
    assert!(e.message.starts_with("invalid TOML"), "{e}");
}

#[test]
fn top_level_key_is_sent_to_its_section() {
    let e = err(&format!("metric = \"x\"\n{GOOD}")).at(1, "metric");
    assert!(e.message.contains("move it under [verify]"), "{e}");
}

#[test]
fn numeric_durations_and_duplicates() {
    let s = parse(&GOOD.replace("\"6m\"", "2.5")).unwrap();
    assert_eq!(s.verify.timeout, Duration::from_millis(2500));
    let e = err(&GOOD.replace("\"6m\"", "-5"));
    assert!(e.message.contains("must not be negative"), "{e}");
    let e = err(&GOOD.replace("patience = 30", "patience = 30\npatience = 31"));
    assert_eq!(e.line, 22, "{e}");
    assert!(e.message.contains("patience = 31"), "{e}");
}

#[test]
fn a_metric_that_no_output_can_name_is_a_spec_error() {
    // `metric = "10x"` passed validation, and the run then stopped with no line number.
    let e = err("[loop]\neditable = [\"a.py\"]\n[verify]\ncommand = \"x\"\nmetric = \"10x\"\n")
        .at(5, "verify.metric");
    assert!(e.message.contains("`10x` is not a metric name"), "{e}");
    err(&format!(
        "{MIN}[verify.holdout]\ncommand = \"h\"\nmetric = \"a b\"\n"
    ))
    .at(8, "verify.holdout.metric");
    err(&format!(
        "{MIN}[verify.holdout]\ncommand = \"h\"\nmin_delta = inf\n"
    ))
    .at(8, "verify.holdout.min_delta");
}

#[test]
fn a_target_or_budget_that_is_not_a_finite_number_is_a_spec_error() {
    stop_values_refused("target", &["nan", "inf", "-inf", "+nan"], "finite");
    err(&format!("{MIN}[stop]\nmax_cost_usd = inf\n")).at(7, "stop.max_cost_usd");
    assert_eq!(
        parse(&format!("{MIN}[stop]\ntarget = -1e300\n"))
            .unwrap()
            .stop
            .target,
        Some(-1e300)
    );
}

#[test]
fn protected_or_pinned_overlapping_editable_through_a_glob_is_a_spec_error() {
    let spec = |editable: &str, key: &str, value: &str| {
        format!("[loop]\neditable = {editable}\n{key} = [\"ok.txt\",\n  \"{value}\"]\n[verify]\ncommand = \"x\"\nmetric = \"m\"\n")
    };
    for (editable, key, value) in [
        ("[\"*.py\"]", "protected", "prepare.py"),
        ("[\"src/\"]", "protected", "src/lib.rs"),
        ("[\"model/*.py\"]", "pinned", "model/"),
        ("[\"a.py\", \"**/*.py\"]", "protected", "lib/*.py"),
    ] {
        let e = err(&spec(editable, key, value));
        assert_eq!((e.line, e.key.clone()), (4, format!("loop.{key}")), "{e}");
        assert!(e.message.contains("cannot be both editable and"), "{e}");
    }
    // Disjoint globs, and a pinned path outside the repository, are fine.
    parse(&spec("[\"*.py\"]", "protected", "*.sh")).unwrap();
    parse(&spec("[\"src/*.rs\"]", "protected", "src/gen/x.rs")).unwrap();
    parse(&spec("[\"**/*.csv\"]", "pinned", "/data/x.csv")).unwrap();
}

#[test]
fn notes_outside_the_worktree_are_a_spec_error() {
    for notes in ["/tmp/notes.md", "../notes.md", "a/../../n.md", "", "notes/"] {
        let e = err(&MIN.replace("[loop]\n", &format!("[loop]\nnotes = \"{notes}\"\n")));
        assert_eq!((e.line, e.key.as_str()), (2, "loop.notes"), "{notes}: {e}");
        assert!(e.message.contains("inside it"), "{notes}: {e}");
    }
    let s = parse(&MIN.replace("[loop]\n", "[loop]\nnotes = \"doc/NOTES.md\"\n")).unwrap();
    assert_eq!(s.loop_.notes, "doc/NOTES.md");
}

#[test]
fn a_spec_file_is_read_bounded_and_its_bad_bytes_located() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("hone.toml");
    std::fs::write(
        &path,
        format!("{MIN}# caf\u{e9}\n").replace('\u{e9}', "\u{fffd}"),
    )
    .unwrap();
    Spec::load(&path).unwrap();
    let mut bytes = MIN.as_bytes().to_vec();
    bytes.extend_from_slice(b"# caf\xe9\n");
    std::fs::write(&path, &bytes).unwrap();
    let e = Spec::load(&path).unwrap_err();
    assert_eq!(e.line, 6, "{e}");
    assert!(e.message.contains("not valid UTF-8"), "{e}");
    let e = Spec::load(Path::new("/dev/zero")).unwrap_err();
    assert!(e.message.contains("not a regular file"), "{e}");
}

#[test]
fn llm_prices_and_temperature_must_be_finite_and_not_negative() {
    for (key, value) in [
        ("price_in_per_mtok", "nan"),
        ("price_out_per_mtok", "-1"),
        ("temperature", "inf"),
    ] {
        let e = err(&format!(
            "{MIN}[agent]\nkind = \"openai\"\nmodel = \"m\"\n{key} = {value}\n"
        ));
        assert_eq!((e.line, e.key.clone()), (9, format!("agent.{key}")), "{e}");
        assert!(e.message.contains("finite number >= 0"), "{e}");
    }
}

#[test]
fn a_run_budget_that_holds_no_call_of_its_model_is_refused_before_the_baseline() {
    let llm = "[agent]\nkind = \"openai\"\nmodel = \"m\"\nmax_tokens = 2048\nprice_in_per_mtok = 1\nprice_out_per_mtok = 100\n";
    let e = err(&format!("{MIN}{llm}[stop]\nmax_tokens = 2048\n"));
    assert_eq!(e.key, "stop.max_tokens", "{e}");
    assert!(e.message.contains("holds no call of the model"), "{e}");
    // 2048 tokens at $100 a million: $0.2048.
    let e = err(&format!("{MIN}{llm}[stop]\nmax_cost_usd = 0.2\n"));
    assert_eq!(e.key, "stop.max_cost_usd", "{e}");
    assert!(e.message.contains("may cost $0.2048"), "{e}");
    parse(&format!(
        "{MIN}{llm}[stop]\nmax_tokens = 100000\nmax_cost_usd = 1\n"
    ))
    .unwrap();
    // The reviewer's model too.
    let review = llm
        .replace("[agent]", "[review]")
        .replace("max_tokens = 2048", "max_tokens = 200000");
    let e = err(&format!("{MIN}{review}[stop]\nmax_tokens = 100000\n"));
    assert!(e.message.contains("[review] max_tokens = 200000"), "{e}");
}

#[test]
fn a_sealed_holdout_stage_is_refused_with_remote_workers() {
    let text = format!(
        "{MIN}[verify.holdout]\ncommand = \"p\"\nevaluate = \"s\"\n[exec]\nbackend = \"workers\"\n\
         remote = \"git@h:r.git\"\n[store]\nurl = \"postgres://db/h\"\n"
    );
    let e = err(&text);
    assert_eq!(e.key, "verify.holdout", "{e}");
    assert!(
        e.message.contains("not supported with [exec] backend"),
        "{e}"
    );
    // Locally it is fine.
    let local = format!("{MIN}[verify.holdout]\ncommand = \"p\"\nevaluate = \"s\"\n");
    assert_eq!(
        parse(&local)
            .unwrap()
            .verify
            .holdout
            .unwrap()
            .evaluate
            .as_deref(),
        Some("s")
    );
}
