//! `[outer]`: the outer loop (see `crate::meta`): which built-in mechanisms run, the search
//! strategy, the portfolio, and the Level 2 script mechanisms (checked to exist and compile
//! when the spec is loaded).

use std::path::Path;

use super::read::{closest, Section};
use super::SpecError;

/// The built-in mechanisms, by the name `[outer] mechanisms` uses.
pub const BUILTIN_MECHANISMS: &[&str] = &[
    "tabu",
    "bandit",
    "explore",
    "restart",
    "plateau",
    "orthogonal",
    "surrogate",
    "segment_restart",
];

/// The keys of `[outer]`.
pub(super) const KEYS: &[&str] = &[
    "mechanisms",
    "strategy_every",
    "max_frozen",
    "segment",
    "portfolio",
    "probation",
    "research_every",
    "scripts",
];

/// `[outer]`: the outer loop (see `crate::meta`). Absent: no mechanism runs and the inner
/// loop behaves exactly as without it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct OuterSpec {
    /// Built-in mechanisms to enable, in the order their hooks run.
    pub mechanisms: Vec<String>,
    /// Revise the Level 1.5 search strategy every this many experiments.
    pub strategy_every: Option<u64>,
    /// The strategy freezes at most this many knobs at a time.
    pub max_frozen: usize,
    /// Experiments per segment (`on_segment_end`, the portfolio's decisions).
    pub segment: u64,
    /// Offline Level 2: turn mechanisms on and off by credit assignment every segment.
    pub portfolio: bool,
    /// Experiments a mechanism may run without any effect before it is reported inert; also
    /// the probation window of a Level 2 script mechanism.
    pub probation: u64,
    /// Level 2: research a new script mechanism every this many experiments (needs an
    /// `openai` or `anthropic` agent).
    pub research_every: Option<u64>,
    /// Level 2: Rhai script mechanisms to load (paths relative to the repository).
    pub scripts: Vec<String>,
    /// The line of each entry of `scripts` in hone.toml (for errors found after parsing).
    #[serde(skip)]
    pub script_lines: Vec<usize>,
}

impl Default for OuterSpec {
    fn default() -> Self {
        OuterSpec {
            mechanisms: Vec::new(),
            strategy_every: None,
            max_frozen: 2,
            segment: 10,
            portfolio: false,
            probation: 10,
            research_every: None,
            scripts: Vec::new(),
            script_lines: Vec::new(),
        }
    }
}

impl OuterSpec {
    /// `scripts` must exist (relative to the directory of hone.toml at `path`, the repository
    /// root in the usual layout) and compile in the sandbox.
    pub(super) fn check_scripts(&self, path: &Path) -> Result<(), SpecError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        for (i, script) in self.scripts.iter().enumerate() {
            let problem = match std::fs::read_to_string(dir.join(script)) {
                Err(e) => format!("cannot read `{script}`: {e}"),
                Ok(source) => match crate::sandbox::script::Script::compile(
                    &source,
                    crate::sandbox::script::Limits::default(),
                ) {
                    Ok(_) => continue,
                    Err(e) => format!("`{script}` does not compile: {e}"),
                },
            };
            return Err(SpecError {
                file: path.to_path_buf(),
                line: self.script_lines.get(i).copied().unwrap_or(1),
                key: "outer.scripts".into(),
                message: problem,
            });
        }
        Ok(())
    }
}

/// `[outer]`, with every mechanism name checked against the built-ins.
pub(super) fn parse(s: &Section) -> Result<OuterSpec, SpecError> {
    let d = OuterSpec::default();
    let mechanisms = mechanisms(s)?;
    let strategy_every = s.count("strategy_every")?;
    let segment = s.count("segment")?.unwrap_or(d.segment);
    let probation = s.count("probation")?.unwrap_or(d.probation);
    let portfolio = s.get_or("portfolio", false)?;
    let research_every = s.count("research_every")?;
    let scripts: Vec<String> = s.get_or_default("scripts")?;
    let mut script_lines = Vec::new();
    for (i, path) in scripts.iter().enumerate() {
        let line = s.element_line("scripts", i);
        script_lines.push(line);
        if !path.ends_with(".rhai") {
            return Err(s.err_at(
                line,
                "scripts",
                format!("`{path}` is not a Rhai script (expected a path ending in .rhai)"),
            ));
        }
    }
    if portfolio && mechanisms.is_empty() {
        return Err(s.err(
            "portfolio",
            "the portfolio turns mechanisms on and off: list some in `mechanisms`",
        ));
    }
    Ok(OuterSpec {
        mechanisms,
        strategy_every,
        max_frozen: s
            .get::<u64>("max_frozen")?
            .map_or(d.max_frozen, |v| v as usize),
        segment,
        portfolio,
        probation,
        research_every,
        scripts,
        script_lines,
    })
}

/// `mechanisms`: built-in names, each at most once.
fn mechanisms(s: &Section) -> Result<Vec<String>, SpecError> {
    let mechanisms: Vec<String> = s.get_or_default("mechanisms")?;
    for (i, name) in mechanisms.iter().enumerate() {
        let line = s.element_line("mechanisms", i);
        if !BUILTIN_MECHANISMS.contains(&name.as_str()) {
            let hint = closest(name, BUILTIN_MECHANISMS)
                .map(|c| format!("did you mean `{c}`? "))
                .unwrap_or_default();
            return Err(s.err_at(
                line,
                "mechanisms",
                format!(
                    "unknown mechanism `{name}`; {hint}(built in: {})",
                    BUILTIN_MECHANISMS.join(", ")
                ),
            ));
        }
        if mechanisms[..i].contains(name) {
            return Err(s.err_at(line, "mechanisms", format!("`{name}` is listed twice")));
        }
    }
    Ok(mechanisms)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{err, parse, GOOD};
    use super::super::Spec;

    #[test]
    fn outer_mechanisms_are_checked_by_name_with_a_suggestion() {
        let s = parse(&format!(
            "{GOOD}\n[outer]\nmechanisms = [\"tabu\", \"plateau\"]\nstrategy_every = 5\n"
        ))
        .unwrap();
        assert_eq!(s.outer.mechanisms, vec!["tabu", "plateau"]);
        assert_eq!(s.outer.strategy_every, Some(5));
        assert_eq!((s.outer.segment, s.outer.portfolio), (10, false));
        assert!(parse(GOOD).unwrap().outer.mechanisms.is_empty());
        let e = err(&format!(
            "{GOOD}\n[outer]\nmechanisms = [\n  \"tabu\",\n  \"bandti\",\n]\n"
        ))
        .at(27, "outer.mechanisms");
        assert!(e.message.contains("did you mean `bandit`?"), "{e}");
        let e = err(&format!("{GOOD}\n[outer]\nstrategy_evry = 5\n"));
        assert!(e.message.contains("did you mean `strategy_every`"), "{e}");
        err(&format!("{GOOD}\n[outer]\nsegment = 0\n")).at(25, "outer.segment");
        let e = err(&format!("mechanisms = [\"tabu\"]\n{GOOD}"));
        assert!(e.message.contains("move it under [outer]"), "{e}");
        let e = err(&format!("{GOOD}\n[outer]\nportfolio = true\n"));
        assert!(e.message.contains("list some"), "{e}");
    }

    #[test]
    fn outer_research_needs_an_http_llm_and_scripts_must_be_rhai() {
        let e =
            err(&format!("{GOOD}\n[outer]\nresearch_every = 10\n")).at(25, "outer.research_every");
        assert!(e.message.contains("needs [agent] kind = \"openai\""), "{e}");
        let e = err(&format!("{GOOD}\n[outer]\nresearch_every = 0\n"));
        assert!(e.message.contains("at least 1"), "{e}");
        err(&format!(
            "{GOOD}\n[outer]\nscripts = [\n  \"a.rhai\",\n  \"b.py\",\n]\n"
        ))
        .at(27, "outer.scripts");
        let s = parse(&format!("{GOOD}\n[outer]\nscripts = [\"m/a.rhai\"]\n")).unwrap();
        assert_eq!(s.outer.scripts, vec!["m/a.rhai"]);
        assert_eq!(s.outer.research_every, None);
        // Loading checks that each script is there and compiles.
        let dir = tempfile::tempdir().unwrap();
        let toml = dir.path().join("hone.toml");
        std::fs::write(
            &toml,
            format!("{GOOD}\n[outer]\nscripts = [\n  \"ok.rhai\",\n  \"bad.rhai\",\n]\n"),
        )
        .unwrap();
        std::fs::write(dir.path().join("ok.rhai"), "fn on_start(v) { () }").unwrap();
        let e = Spec::load(&toml).unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (27, "outer.scripts"), "{e}");
        assert!(e.message.contains("cannot read `bad.rhai`"), "{e}");
        std::fs::write(dir.path().join("bad.rhai"), "fn on_start(v) { let }").unwrap();
        let e = Spec::load(&toml).unwrap_err();
        assert_eq!(e.line, 27, "{e}");
        assert!(e.message.contains("`bad.rhai` does not compile"), "{e}");
        std::fs::write(dir.path().join("bad.rhai"), "fn on_start(v) { 1 }").unwrap();
        assert!(Spec::load(&toml).is_ok());
    }
}
