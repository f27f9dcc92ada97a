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

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rhai::{Array, CallFnOptions, Dynamic, Engine, Map, Scope, AST};

use super::{Candidate, Guidance, Mechanism, Mode, Outcome, Verdict, View};
use crate::propose::knobs::{Config, Domain, Knob, KnobValue};
use crate::spec::Direction;
use crate::store::ExperimentRecord;

/// The hooks a script may define, with their parameters.
pub const HOOKS: &[(&str, usize)] = &[
    ("on_start", 1),
    ("before_propose", 1),
    ("candidates", 1),
    ("filter", 2),
    ("on_result", 2),
    ("on_segment_end", 1),
];

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

/// The sandbox's caps for one hook call.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    pub operations: u64,
    pub call_levels: usize,
    pub string_size: usize,
    pub array_size: usize,
    pub map_size: usize,
    pub deadline: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            operations: 2_000_000,
            call_levels: 32,
            string_size: 64 * 1024,
            array_size: 10_000,
            map_size: 1_000,
            deadline: Duration::from_millis(500),
        }
    }
}

/// A compiled script in its sandbox, with the state (`this`) its hooks keep.
pub struct Script {
    engine: Engine,
    ast: AST,
    deadline: Rc<Cell<Option<Instant>>>,
    limits: Limits,
    state: Dynamic,
    /// The hooks it defines, in [`HOOKS`] order.
    hooks: Vec<&'static str>,
}

/// A seeded draw in [0, 1) (splitmix64 of the seed and the index).
fn rand_unit(seed: i64, i: i64) -> f64 {
    super::Rng::new(seed as u64, i as u64).unit()
}

fn engine(limits: &Limits, deadline: Rc<Cell<Option<Instant>>>) -> Engine {
    use rhai::packages::{
        BasicArrayPackage, BasicMapPackage, BasicMathPackage, CorePackage, MoreStringPackage,
        Package,
    };
    let mut e = Engine::new_raw();
    e.register_global_module(CorePackage::new().as_shared_module());
    e.register_global_module(BasicArrayPackage::new().as_shared_module());
    e.register_global_module(BasicMapPackage::new().as_shared_module());
    e.register_global_module(BasicMathPackage::new().as_shared_module());
    e.register_global_module(MoreStringPackage::new().as_shared_module());
    e.register_fn("rand_unit", rand_unit);
    e.disable_symbol("eval");
    e.set_max_operations(limits.operations);
    e.set_max_call_levels(limits.call_levels);
    e.set_max_string_size(limits.string_size);
    e.set_max_array_size(limits.array_size);
    e.set_max_map_size(limits.map_size);
    e.set_max_expr_depths(64, 32);
    e.set_strict_variables(true);
    e.on_progress(move |_| match deadline.get() {
        Some(at) if Instant::now() >= at => Some(Dynamic::from("deadline")),
        _ => None,
    });
    e
}

impl Script {
    /// Compiles `source` in a fresh sandbox. Errors say where (line, column) and what; a script
    /// that defines no hook, or a hook with the wrong number of parameters, is refused too.
    pub fn compile(source: &str, limits: Limits) -> Result<Script, String> {
        let deadline = Rc::new(Cell::new(None));
        let engine = engine(&limits, deadline.clone());
        let ast = engine.compile(source).map_err(|e| e.to_string())?;
        let mut hooks = Vec::new();
        for f in ast.iter_functions() {
            if let Some((name, arity)) = HOOKS.iter().find(|(h, _)| *h == f.name) {
                if f.params.len() != *arity {
                    return Err(format!(
                        "`{name}` must take {arity} parameter(s), it takes {}",
                        f.params.len()
                    ));
                }
                if !hooks.contains(name) {
                    hooks.push(*name);
                }
            }
        }
        if hooks.is_empty() {
            return Err(format!(
                "the script defines none of the hooks ({})",
                HOOKS.iter().map(|(h, _)| *h).collect::<Vec<_>>().join(", ")
            ));
        }
        hooks.sort_by_key(|h| HOOKS.iter().position(|(x, _)| x == h));
        Ok(Script {
            engine,
            ast,
            deadline,
            limits,
            state: Dynamic::from_map(Map::new()),
            hooks,
        })
    }

    /// The hooks the script defines.
    pub fn hooks(&self) -> &[&'static str] {
        &self.hooks
    }

    /// Calls a hook in the sandbox (`Ok(())` as unit when the script does not define it).
    pub fn call(&mut self, hook: &str, args: Vec<Dynamic>) -> Result<Dynamic, String> {
        if !self.hooks.contains(&hook) {
            return Ok(Dynamic::UNIT);
        }
        self.deadline
            .set(Some(Instant::now() + self.limits.deadline));
        let mut scope = Scope::new();
        let options = CallFnOptions::new()
            .eval_ast(false)
            .rewind_scope(true)
            .bind_this_ptr(&mut self.state);
        let engine = &self.engine;
        let ast = &self.ast;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            engine.call_fn_with_options::<Dynamic>(options, &mut scope, ast, hook, args)
        }));
        self.deadline.set(None);
        match result {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(describe_error(&e, &self.limits)),
            Err(_) => Err(format!("`{hook}` panicked inside the script engine")),
        }
    }
}

fn describe_error(e: &rhai::EvalAltResult, limits: &Limits) -> String {
    use rhai::EvalAltResult as E;
    match e {
        E::ErrorTerminated(..) => format!(
            "stopped at the deadline of {} ms per hook call",
            limits.deadline.as_millis()
        ),
        E::ErrorTooManyOperations(..) => format!(
            "stopped after {} operations (the cap per hook call)",
            limits.operations
        ),
        E::ErrorStackOverflow(..) => format!(
            "stopped at {} nested calls (the cap on call depth)",
            limits.call_levels
        ),
        E::ErrorDataTooLarge(what, ..) => format!("stopped: {what} over the sandbox's size cap"),
        E::ErrorRuntime(v, pos) => format!("the script threw `{v}` ({pos})"),
        other => format!("the script failed: {other}"),
    }
}

// ---- hone's data as the script sees it ----

fn knob_value(v: &KnobValue) -> Dynamic {
    match v {
        KnobValue::Bool(b) => Dynamic::from_bool(*b),
        KnobValue::Int(i) => Dynamic::from_int(*i),
        KnobValue::Float(x) => Dynamic::from_float(*x),
        KnobValue::Str(s) => Dynamic::from(s.clone()),
    }
}

fn config_map(c: &Config) -> Dynamic {
    let m: Map = c
        .iter()
        .map(|(k, v)| (k.as_str().into(), knob_value(v)))
        .collect();
    Dynamic::from_map(m)
}

fn opt_float(x: Option<f64>) -> Dynamic {
    x.map_or(Dynamic::UNIT, Dynamic::from_float)
}

/// The history as arrays of maps: `n, status, metric, delta, config, description`; `delta` is
/// the metric minus the best metric before the experiment.
pub fn history_array(history: &[ExperimentRecord], direction: Direction) -> Array {
    let mut best: Option<f64> = None;
    let mut out = Array::new();
    for e in history {
        out.push(experiment_map(e, best));
        if let (Some(m), true) = (
            e.objective,
            matches!(
                e.status(),
                crate::store::Status::Keep | crate::store::Status::Baseline
            ),
        ) {
            best = Some(match (best, direction) {
                (None, _) => m,
                (Some(b), Direction::Minimize) => b.min(m),
                (Some(b), Direction::Maximize) => b.max(m),
            });
        }
    }
    out
}

fn experiment_map(e: &ExperimentRecord, best_before: Option<f64>) -> Dynamic {
    let mut m = Map::new();
    m.insert("n".into(), Dynamic::from_int(e.n as i64));
    m.insert(
        "status".into(),
        Dynamic::from(e.status().as_str().to_string()),
    );
    m.insert("metric".into(), opt_float(e.objective));
    m.insert(
        "delta".into(),
        opt_float(match (e.objective, best_before) {
            (Some(x), Some(b)) => Some(x - b),
            _ => None,
        }),
    );
    m.insert(
        "config".into(),
        View::config_of(e).map_or(Dynamic::UNIT, |c| config_map(&c)),
    );
    m.insert(
        "description".into(),
        Dynamic::from(crate::propose::prompt::sanitize(&e.description, 500)),
    );
    Dynamic::from_map(m)
}

fn knob_map(k: &Knob) -> Dynamic {
    let mut m = Map::new();
    m.insert("name".into(), Dynamic::from(k.name.clone()));
    let (kind, lo, hi, choices) = match &k.domain {
        Domain::Float { lo, hi, .. } => (
            "float",
            Dynamic::from_float(*lo),
            Dynamic::from_float(*hi),
            Array::new(),
        ),
        Domain::Int { lo, hi, .. } => (
            "int",
            Dynamic::from_int(*lo),
            Dynamic::from_int(*hi),
            Array::new(),
        ),
        Domain::Bool => ("bool", Dynamic::UNIT, Dynamic::UNIT, Array::new()),
        Domain::Choice(c) => (
            "choice",
            Dynamic::UNIT,
            Dynamic::UNIT,
            c.iter().map(knob_value).collect(),
        ),
        Domain::Fixed => ("fixed", Dynamic::UNIT, Dynamic::UNIT, Array::new()),
    };
    m.insert("kind".into(), Dynamic::from(kind.to_string()));
    m.insert("lo".into(), lo);
    m.insert("hi".into(), hi);
    m.insert("choices".into(), Dynamic::from_array(choices));
    m.insert("value".into(), knob_value(&k.value));
    Dynamic::from_map(m)
}

/// The view as the script's `view` map.
pub fn view_map(view: &View<'_>) -> Dynamic {
    let history = history_array(view.history, view.direction);
    let best = view
        .best()
        .and_then(|b| view.history.iter().position(|e| e.n == b.n))
        .and_then(|i| history.get(i).cloned())
        .unwrap_or(Dynamic::UNIT);
    let mut m = Map::new();
    m.insert("n".into(), Dynamic::from_int(view.n as i64));
    m.insert("seed".into(), Dynamic::from_int(view.seed as i64));
    m.insert(
        "direction".into(),
        Dynamic::from(
            match view.direction {
                Direction::Minimize => "minimize",
                Direction::Maximize => "maximize",
            }
            .to_string(),
        ),
    );
    m.insert(
        "knobs_proposer".into(),
        Dynamic::from_bool(view.knobs_proposer),
    );
    m.insert(
        "knobs".into(),
        Dynamic::from_array(view.knobs.iter().map(knob_map).collect()),
    );
    m.insert("history".into(), Dynamic::from_array(history));
    m.insert("best".into(), best);
    Dynamic::from_map(m)
}

fn proposal_map(c: &Candidate<'_>) -> Dynamic {
    let mut m = Map::new();
    m.insert(
        "description".into(),
        Dynamic::from(crate::propose::prompt::sanitize(c.description, 500)),
    );
    m.insert("config".into(), c.config.map_or(Dynamic::UNIT, config_map));
    m.insert(
        "diff".into(),
        c.diff
            .map_or(Dynamic::UNIT, |d| Dynamic::from(truncate(d, 16 * 1024))),
    );
    Dynamic::from_map(m)
}

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

// ---- what a script returns, checked and typed ----

fn type_of(v: &Dynamic) -> &'static str {
    if v.is_unit() {
        "()"
    } else if v.is_bool() {
        "a bool"
    } else if v.is_int() {
        "an integer"
    } else if v.is_float() {
        "a float"
    } else if v.is_string() {
        "a string"
    } else if v.is_array() {
        "an array"
    } else if v.is_map() {
        "a map"
    } else {
        "a value of another type"
    }
}

fn as_str(v: &Dynamic, what: &str) -> Result<String, String> {
    v.clone()
        .into_string()
        .map_err(|_| format!("{what} must be a string, not {}", type_of(v)))
}

fn str_list(v: &Dynamic, what: &str) -> Result<Vec<String>, String> {
    if v.is_string() {
        return Ok(vec![as_str(v, what)?]);
    }
    let Some(a) = v.clone().try_cast::<Array>() else {
        return Err(format!(
            "{what} must be an array of strings, not {}",
            type_of(v)
        ));
    };
    a.iter().map(|x| as_str(x, what)).collect()
}

fn number(v: &Dynamic) -> Option<f64> {
    v.as_float()
        .ok()
        .or_else(|| v.as_int().ok().map(|i| i as f64))
}

/// One knob value from a script, checked against the knob's domain.
fn checked_value(knobs: &[Knob], name: &str, v: &Dynamic) -> Result<KnobValue, String> {
    let Some(k) = knobs.iter().find(|k| k.name == name) else {
        return Err(format!("`{name}` is not a knob of this project"));
    };
    let bad = |want: String| format!("`{name}` must be {want}, not {} `{v}`", type_of(v));
    match &k.domain {
        Domain::Float { lo, hi, .. } => match number(v) {
            Some(x) if x >= *lo && x <= *hi => Ok(KnobValue::Float(x)),
            _ => Err(bad(format!("a number in {lo}..{hi}"))),
        },
        Domain::Int { lo, hi, .. } => match v.as_int() {
            Ok(x) if x >= *lo && x <= *hi => Ok(KnobValue::Int(x)),
            _ => Err(bad(format!("an integer in {lo}..{hi}"))),
        },
        Domain::Bool => v
            .as_bool()
            .map(KnobValue::Bool)
            .map_err(|_| bad("true or false".into())),
        Domain::Choice(options) => {
            let got = if let Ok(b) = v.as_bool() {
                Some(KnobValue::Bool(b))
            } else if let Ok(i) = v.as_int() {
                Some(KnobValue::Int(i))
            } else if let Ok(x) = v.as_float() {
                Some(KnobValue::Float(x))
            } else {
                v.clone().into_string().ok().map(KnobValue::Str)
            };
            match got {
                Some(g) if options.contains(&g) => Ok(g),
                _ => Err(bad(format!(
                    "one of {}",
                    options
                        .iter()
                        .map(|o| o.to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        }
        Domain::Fixed => Err(format!("`{name}` is fixed and may not be changed")),
    }
}

/// A configuration from a script's map, over `base` (knobs left out keep their value there).
pub fn checked_config(knobs: &[Knob], base: &Config, v: &Dynamic) -> Result<Config, String> {
    let Some(m) = v.clone().try_cast::<Map>() else {
        return Err(format!(
            "a configuration must be a map of knob names to values, not {}",
            type_of(v)
        ));
    };
    let mut out = base.clone();
    for (name, value) in &m {
        let value = checked_value(knobs, name.as_str(), value)?;
        out.insert(name.to_string(), value);
    }
    Ok(out)
}

fn map_of(v: &Dynamic, what: &str, keys: &[&str]) -> Result<Map, String> {
    let Some(m) = v.clone().try_cast::<Map>() else {
        return Err(format!("{what} must be a map, not {}", type_of(v)));
    };
    if let Some(k) = m.keys().find(|k| !keys.contains(&k.as_str())) {
        return Err(format!(
            "{what} has an unknown key `{k}` (allowed: {})",
            keys.join(", ")
        ));
    }
    Ok(m)
}

/// `before_propose`'s answer as guidance.
pub fn to_guidance(v: &Dynamic, knobs: &[Knob]) -> Result<Guidance, String> {
    if v.is_unit() {
        return Ok(Guidance::default());
    }
    let m = map_of(
        v,
        "before_propose's answer",
        &["text", "focus", "frozen", "step_scale", "mode"],
    )?;
    let mut g = Guidance::default();
    if let Some(t) = m.get("text") {
        g.text = str_list(t, "`text`")?
            .into_iter()
            .map(|t| crate::propose::prompt::sanitize(&t, 300).replace('\n', " "))
            .filter(|t| !t.trim().is_empty())
            .collect();
    }
    if let Some(f) = m.get("focus") {
        g.focus = str_list(f, "`focus`")?;
    }
    if let Some(f) = m.get("frozen") {
        g.frozen = str_list(f, "`frozen`")?;
        if let Some(bad) = g
            .frozen
            .iter()
            .find(|f| !knobs.iter().any(|k| &k.name == *f))
        {
            return Err(format!("`frozen` names `{bad}`, which is not a knob"));
        }
    }
    if let Some(s) = m.get("step_scale") {
        match number(s) {
            Some(x) if (0.05..=20.0).contains(&x) => g.step_scale = Some(x),
            _ => {
                return Err(format!(
                    "`step_scale` must be a number in 0.05..20.0, not {} `{s}`",
                    type_of(s)
                ))
            }
        }
    }
    if let Some(mode) = m.get("mode") {
        g.mode = Some(match as_str(mode, "`mode`")?.as_str() {
            "explore" => Mode::Explore,
            "exploit" => Mode::Exploit,
            other => {
                return Err(format!(
                    "`mode` must be \"explore\" or \"exploit\", not \"{other}\""
                ))
            }
        });
    }
    Ok(g)
}

/// `filter`'s answer as a verdict.
pub fn to_verdict(v: &Dynamic, knobs: &[Knob], base: &Config) -> Result<Verdict, String> {
    if v.is_unit() {
        return Ok(Verdict::Accept);
    }
    if let Ok(b) = v.as_bool() {
        return Ok(if b {
            Verdict::Accept
        } else {
            Verdict::Reject("rejected by the script".into())
        });
    }
    let m = map_of(v, "filter's answer", &["reject", "modify", "reason"])?;
    match (m.get("reject"), m.get("modify")) {
        (Some(_), Some(_)) => Err("filter's answer has both `reject` and `modify`".into()),
        (Some(r), None) => Ok(Verdict::Reject(
            crate::propose::prompt::sanitize(&as_str(r, "`reject`")?, 300).replace('\n', " "),
        )),
        (None, Some(c)) => {
            let reason = match m.get("reason") {
                Some(r) => as_str(r, "`reason`")?,
                None => String::new(),
            };
            Ok(Verdict::Modify(
                checked_config(knobs, base, c)?,
                crate::propose::prompt::sanitize(&reason, 300).replace('\n', " "),
            ))
        }
        (None, None) => Err("filter's answer must have `reject` or `modify`".into()),
    }
}

/// `candidates`' answer as configurations over `base`.
pub fn to_candidates(v: &Dynamic, knobs: &[Knob], base: &Config) -> Result<Vec<Config>, String> {
    if v.is_unit() {
        return Ok(Vec::new());
    }
    let Some(a) = v.clone().try_cast::<Array>() else {
        return Err(format!(
            "candidates must return an array of maps, not {}",
            type_of(v)
        ));
    };
    a.iter()
        .enumerate()
        .map(|(i, c)| checked_config(knobs, base, c).map_err(|e| format!("candidate {i}: {e}")))
        .collect()
}

/// The answer of `on_start`, `on_result` or `on_segment_end`: what changed, if anything.
pub fn to_change(v: &Dynamic, hook: &str) -> Result<Option<String>, String> {
    if v.is_unit() {
        return Ok(None);
    }
    let s = as_str(v, &format!("{hook}'s answer"))?;
    let s = crate::propose::prompt::sanitize(&s, 300).replace('\n', " ");
    Ok((!s.trim().is_empty()).then_some(s))
}

/// The configuration candidates are completed from: the best experiment's, else the knobs'
/// current values.
fn base_config(view: &View<'_>) -> Config {
    view.best()
        .and_then(View::config_of)
        .unwrap_or_else(|| crate::propose::knobs::config_of(view.knobs))
}

/// A script as a [`Mechanism`]: every hook converts, calls and validates; the first failure
/// stops it for good (reported once through [`Mechanism::fault`]).
pub struct ScriptMechanism {
    name: String,
    script: Script,
    fault: Option<String>,
    dead: bool,
}

impl ScriptMechanism {
    /// A mechanism named `script:<first 8 hex digits of the source's SHA-256>`.
    pub fn new(script: Script, source: &str) -> ScriptMechanism {
        ScriptMechanism {
            name: format!("script:{}", &hash(source)[..8]),
            script,
            fault: None,
            dead: false,
        }
    }

    /// Compiles `source` and wraps it.
    pub fn compile(source: &str, limits: Limits) -> Result<ScriptMechanism, String> {
        Ok(ScriptMechanism::new(
            Script::compile(source, limits)?,
            source,
        ))
    }

    /// The hooks the script defines.
    pub fn hooks(&self) -> &[&'static str] {
        self.script.hooks()
    }

    /// Calls `hook` with the arguments `args` builds (only when the script defines it) and
    /// converts its answer; any failure stops the mechanism.
    fn run<T>(
        &mut self,
        hook: &str,
        args: impl FnOnce() -> Vec<Dynamic>,
        convert: impl FnOnce(&Dynamic) -> Result<T, String>,
    ) -> Option<T> {
        if self.dead || !self.script.hooks().contains(&hook) {
            return None;
        }
        match self
            .script
            .call(hook, args())
            .and_then(|v| convert(&v).map_err(|e| format!("`{hook}` returned a bad value: {e}")))
        {
            Ok(t) => Some(t),
            Err(e) => {
                self.dead = true;
                self.fault = Some(format!("`{hook}`: {e}"));
                None
            }
        }
    }
}

/// The SHA-256 of a script's text, in hex.
pub fn hash(source: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(source.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Mechanism for ScriptMechanism {
    fn name(&self) -> &str {
        &self.name
    }

    fn fault(&mut self) -> Option<String> {
        self.fault.take()
    }

    fn on_start(&mut self, view: &View<'_>) -> Option<String> {
        self.run(
            "on_start",
            || vec![view_map(view)],
            |v| to_change(v, "on_start"),
        )
        .flatten()
    }

    fn before_propose(&mut self, view: &View<'_>) -> Guidance {
        self.run(
            "before_propose",
            || vec![view_map(view)],
            |v| to_guidance(v, view.knobs),
        )
        .unwrap_or_default()
    }

    fn candidates(&mut self, view: &View<'_>) -> Vec<Config> {
        let base = base_config(view);
        self.run(
            "candidates",
            || vec![view_map(view)],
            |v| to_candidates(v, view.knobs, &base),
        )
        .unwrap_or_default()
    }

    fn filter(&mut self, candidate: &Candidate<'_>, view: &View<'_>) -> Verdict {
        let base = candidate
            .config
            .cloned()
            .unwrap_or_else(|| base_config(view));
        self.run(
            "filter",
            || vec![proposal_map(candidate), view_map(view)],
            |v| to_verdict(v, view.knobs, &base),
        )
        .unwrap_or(Verdict::Accept)
    }

    fn on_result(&mut self, outcome: &Outcome<'_>) -> Option<String> {
        self.run(
            "on_result",
            || {
                // The outcome as the view's history shows it (with its delta): the last entry.
                let view = view_map(&outcome.view);
                let record = view
                    .clone()
                    .try_cast::<Map>()
                    .and_then(|m| m.get("history").cloned())
                    .and_then(|h| h.try_cast::<Array>())
                    .and_then(|h| h.last().cloned())
                    .unwrap_or_else(|| experiment_map(outcome.record, None));
                vec![record, view]
            },
            |v| to_change(v, "on_result"),
        )
        .flatten()
    }

    fn on_segment_end(&mut self, view: &View<'_>) -> Option<String> {
        self.run(
            "on_segment_end",
            || vec![view_map(view)],
            |v| to_change(v, "on_segment_end"),
        )
        .flatten()
    }
}

/// What [`contract`] found: the hooks exercised and the operations they were allowed.
#[derive(Clone, Debug, PartialEq)]
pub struct ContractReport {
    pub calls: usize,
}

/// Contract tests on synthetic histories: every defined hook returns the right shape on a
/// few made-up runs (empty, improving, stuck), within the sandbox's caps, and the same
/// answers twice from a fresh state given the same seed (determinism).
pub fn contract(source: &str, limits: Limits, knobs: &[Knob]) -> Result<ContractReport, String> {
    let histories = synthetic_histories(knobs);
    let pass = |seed: u64| -> Result<(Vec<String>, usize), String> {
        let mut m = ScriptMechanism::compile(source, limits)?;
        let mut answers = Vec::new();
        let mut calls = 0;
        for h in &histories {
            let view = View {
                n: h.last().map_or(0, |e| e.n + 1),
                history: h,
                knobs,
                knobs_proposer: !knobs.is_empty(),
                direction: Direction::Minimize,
                seed,
                editable: &[],
            };
            answers.push(format!("{:?}", m.on_start(&view)));
            answers.push(format!("{:?}", m.before_propose(&view)));
            answers.push(format!("{:?}", m.candidates(&view)));
            let config = h.last().and_then(View::config_of);
            let cand = Candidate {
                description: "a synthetic proposal",
                config: config.as_ref(),
                diff: Some("--- a/x\n+++ b/x\n"),
            };
            answers.push(format!("{:?}", m.filter(&cand, &view)));
            if let Some(last) = h.last() {
                let outcome = Outcome { record: last, view };
                answers.push(format!("{:?}", m.on_result(&outcome)));
            }
            answers.push(format!("{:?}", m.on_segment_end(&view)));
            calls += m.hooks().len();
            if let Some(f) = m.fault() {
                return Err(f);
            }
        }
        Ok((answers, calls))
    };
    let (first, calls) = pass(7)?;
    let (second, _) = pass(7)?;
    if first != second {
        let i = first
            .iter()
            .zip(&second)
            .position(|(a, b)| a != b)
            .unwrap_or(0);
        return Err(format!(
            "not deterministic given the seed: two runs answered `{}` and then `{}`",
            crate::propose::prompt::sanitize(&first[i], 200),
            crate::propose::prompt::sanitize(&second[i], 200)
        ));
    }
    Ok(ContractReport { calls })
}

/// Made-up runs over `knobs`: just the baseline, a run that improves, a run that is stuck.
fn synthetic_histories(knobs: &[Knob]) -> Vec<Vec<ExperimentRecord>> {
    use crate::store::Status;
    let base = crate::propose::knobs::config_of(knobs);
    let exp = |n: u64, status: Status, m: f64| ExperimentRecord {
        n,
        status: Some(status),
        objective: Some(m),
        description: format!("synthetic experiment {n}"),
        config: serde_json::to_value(&base).ok(),
        ..Default::default()
    };
    let baseline = vec![exp(0, Status::Baseline, 1.0)];
    let improving: Vec<ExperimentRecord> = std::iter::once(exp(0, Status::Baseline, 1.0))
        .chain((1..8).map(|n| exp(n, Status::Keep, 1.0 - n as f64 * 0.05)))
        .collect();
    let stuck: Vec<ExperimentRecord> = std::iter::once(exp(0, Status::Baseline, 1.0))
        .chain((1..15).map(|n| {
            exp(
                n,
                if n % 5 == 0 {
                    Status::Crash
                } else {
                    Status::Discard
                },
                1.0 + n as f64 * 0.01,
            )
        }))
        .collect();
    vec![baseline, improving, stuck]
}

/// What a replay on a run's recorded history found: of the past proposals, how many the
/// script's filter would have rejected or changed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Replay {
    pub proposals: usize,
    pub rejected: usize,
    pub modified: usize,
    pub guided: usize,
}

/// Replays the script over `history`: for every experiment after the baseline, `filter` and
/// `before_propose` see the run as it was just before it.
pub fn replay(
    source: &str,
    limits: Limits,
    history: &[ExperimentRecord],
    knobs: &[Knob],
    direction: Direction,
    seed: u64,
) -> Result<Replay, String> {
    let mut m = ScriptMechanism::compile(source, limits)?;
    let mut r = Replay::default();
    let editable: Vec<String> = Vec::new();
    for i in 1..history.len() {
        let e = &history[i];
        let view = View {
            n: e.n,
            history: &history[..i],
            knobs,
            knobs_proposer: !knobs.is_empty(),
            direction,
            seed,
            editable: &editable,
        };
        if !m.before_propose(&view).is_empty() {
            r.guided += 1;
        }
        let config = View::config_of(e);
        let cand = Candidate {
            description: &e.description,
            config: config.as_ref(),
            diff: None,
        };
        r.proposals += 1;
        match m.filter(&cand, &view) {
            Verdict::Reject(_) => r.rejected += 1,
            Verdict::Modify(..) => r.modified += 1,
            Verdict::Accept => {}
        }
        if let Some(f) = m.fault() {
            return Err(format!("replay at experiment #{}: {f}", e.n));
        }
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{config, exp, knobs, view};
    use super::*;
    use crate::store::Status;

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
    fn an_endless_loop_hits_the_operations_cap() {
        let e = call_err("fn on_start(v) { loop { } }", limits());
        assert!(e.contains("operations"), "{e}");
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

    #[test]
    fn recursion_hits_the_call_depth_cap() {
        let e = call_err(
            "fn deeper(i) { deeper(i + 1) } fn on_start(v) { deeper(0) }",
            limits(),
        );
        assert!(e.contains("nested calls"), "{e}");
    }

    #[test]
    fn strings_arrays_and_maps_hit_their_size_caps() {
        let e = call_err(
            "fn on_start(v) { let s = \"x\"; loop { s += s; } }",
            limits(),
        );
        assert!(e.contains("size cap"), "{e}");
        let e = call_err(
            "fn on_start(v) { let a = []; loop { a.push(1); } }",
            limits(),
        );
        assert!(e.contains("size cap"), "{e}");
        let e = call_err(
            "fn on_start(v) { let a = []; a.pad(100000000, 0); }",
            limits(),
        );
        assert!(
            e.contains("size cap"),
            "one allocation past the cap is refused: {e}"
        );
        let e = call_err(
            "fn on_start(v) { let m = #{}; let i = 0; loop { let one = #{}; one[`k${i}`] = i; m += one; i += 1; } }",
            limits(),
        );
        assert!(e.contains("size cap"), "{e}");
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
        let r = replay(src, limits(), &h, &k, Direction::Minimize, 1).unwrap();
        assert_eq!((r.proposals, r.rejected, r.modified), (5, 2, 0));
    }
}
