//! The Rhai sandbox a script runs in, and nothing of hone's: it imports only std and rhai, so
//! the spec can check a script (syntax, hooks, arities) without the outer loop.
//!
//! The engine is raw Rhai with only the language core, arithmetic, logic, strings, arrays,
//! maps and maths registered: no file, network or time access, no `import`, no `eval`. Every
//! hook call is capped in operations, call depth, string, array and map sizes, and wall-clock
//! time (a deadline checked on the engine's progress callback). Functions hone adds (the
//! seeded `rand_unit`) are registered by the caller through [`Script::compile_with`].

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use rhai::{CallFnOptions, Dynamic, Engine, Map, Scope, AST};

/// The hooks a script may define, with their parameters.
pub const HOOKS: &[(&str, usize)] = &[
    ("on_start", 1),
    ("before_propose", 1),
    ("candidates", 1),
    ("filter", 2),
    ("on_result", 2),
    ("on_segment_end", 1),
];

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

/// The longest script hone compiles (32 KiB): compiling takes no part of a hook's operation
/// or time limits, and its time grows faster than the script (a 400 KB script of one function
/// with 20,000 variables took minutes); real mechanisms are a few KiB.
pub const MAX_SOURCE_BYTES: usize = 32 * 1024;

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
    ///
    /// The sandbox alone: functions the caller adds are not registered (compiling does not
    /// resolve calls, so the answer is the same); a script to run is compiled through
    /// [`Script::compile_with`].
    pub fn compile(source: &str, limits: Limits) -> Result<Script, String> {
        Script::compile_with(source, limits, |_| {})
    }

    /// [`Script::compile`] with `register` adding the caller's functions to the engine first.
    pub fn compile_with(
        source: &str,
        limits: Limits,
        register: impl FnOnce(&mut Engine),
    ) -> Result<Script, String> {
        if source.len() > MAX_SOURCE_BYTES {
            return Err(format!(
                "the script is {} bytes; hone compiles scripts of at most {MAX_SOURCE_BYTES} bytes",
                source.len()
            ));
        }
        let deadline = Rc::new(Cell::new(None));
        let mut engine = engine(&limits, deadline.clone());
        register(&mut engine);
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
