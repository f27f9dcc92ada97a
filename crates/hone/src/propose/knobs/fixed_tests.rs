//! Tests of `[loop] fixed` (`super`): what is a change to a fixed constant, what is not.

use super::*;

fn fixed() -> Vec<String> {
    vec!["EPOCHS".into(), "SEED".into()]
}

const OLD: &str = "LR = 0.1\nEPOCHS = 5\nSEED = 42\nprint(LR)\n";

/// Each of `changes`, added to [`OLD`], is a violation of `fixed()`.
fn assert_caught(changes: &[&str]) {
    for changed in changes {
        let new = format!("{OLD}{changed}\n");
        assert!(
            fixed_changed(&fixed(), "t.py", OLD, Some(&new)).is_some(),
            "missed: {changed}"
        );
    }
}

#[test]
fn a_fixed_constant_changed_removed_or_deleted_is_said() {
    assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(OLD)), None);
    // Other constants may move; a spacing or a comment is no change of value.
    let moved = "LR = 0.3\nEPOCHS   = 5  # five\nSEED = 42\nprint(LR)\n";
    assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(moved)), None);
    let longer = OLD.replace("EPOCHS = 5", "EPOCHS = 60");
    let why = fixed_changed(&fixed(), "t.py", OLD, Some(&longer)).unwrap();
    assert_eq!(
        why,
        "changed `EPOCHS` in `t.py` from `=5` to `=60`: [loop] fixed keeps it as the run started"
    );
    let seed = OLD.replace("SEED = 42", "SEED = 7");
    assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&seed))
        .unwrap()
        .contains("`SEED`"));
    let gone = OLD.replace("EPOCHS = 5\n", "");
    assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&gone))
        .unwrap()
        .starts_with("no longer assigns `EPOCHS` in `t.py` as it did (`=5`)"));
    assert!(fixed_changed(&fixed(), "t.py", OLD, None)
        .unwrap()
        .starts_with("deleted `t.py`"));
    // Assigned again further down: the later value counts too.
    let again = format!("{OLD}EPOCHS = 60\n");
    assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&again)).is_some());
    let inside = format!("{OLD}def main():\n    global EPOCHS\n    EPOCHS *= 12\n");
    assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&inside))
        .unwrap()
        .contains("to `*=12`"));
    // Reading it is no assignment; nor is a comparison, nor a longer name.
    let reads = format!("{OLD}if EPOCHS == 5 or EPOCHS <= 3: EPOCHS_DONE = 1\nprint(EPOCHS)\n");
    assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(&reads)), None);
    let annotated = "EPOCHS: int = 5\n";
    assert!(fixed_changed(&fixed(), "t.py", annotated, Some("EPOCHS: int = 6\n")).is_some());
    // The forms an agent may well write, in Python and in languages with declarations.
    assert_caught(&[
        "import os; EPOCHS = 6",
        "if True: EPOCHS = 7",
        "EPOCHS, _ = 8, 0",
        "X = EPOCHS = 9",
        "for EPOCHS in [11]: pass",
        "def f():\n\tglobal EPOCHS; EPOCHS = 60",
        "\u{ff25}POCHS = 10",
        "EPOCHS := 12",
        "EPOCHS //= 2",
        // A reviewer's: what Python reads as EPOCHS, and the bindings that are no `=`.
        "\u{1d404}POCHS = 8",
        "_q = '\"\"\"'\nEPOCHS = 10",
        "x = 1 # \"\"\"\nEPOCHS = 10",
        "(EPOCHS, _) = 12, 0",
        "[EPOCHS, _unused] = [16, 0]",
        "((a, EPOCHS), b) = (1, 2), 3",
        "match 0:\n    case _: EPOCHS = 14",
        "from signal import SIGTERM as EPOCHS",
        "from tweaks import EPOCHS",
        "import numpy as EPOCHS",
        "s = 'it\\'s \"\"\"'\nEPOCHS = 10",
        // A fourth's: a quote in a field's format spec is a fill character, not a string.
        "_ = f\"{0:'^9}\"; EPOCHS = 60",
        "_ = f'{0!r:\"<9}'; EPOCHS = 61",
        "_ = f\"\"\"{0:'^9}\"\"\"\nEPOCHS = 62\n# '\"\"\"",
        "_ = f\"{d['k']:'>{w}}\"; EPOCHS = 63",
        // A fifth's: a triple-quoted string in a field, a backslash before a brace, a named
        // character, a statement cut at hone's 64 KiB bound.
        "_ = f\"{'''a'b'''}\"; EPOCHS = 64",
        "_ = f\"\\{{\"; EPOCHS = 65",
        "_ = f\"\\N{EM DASH}{0}\"; EPOCHS = 66",
        // A third's: bindings that are no `=` at the top, and lines as Python ends them.
        "if (EPOCHS := EPOCHS * 4) > 0:\n    pass",
        "print(f\"epochs: {(EPOCHS := 12)}\")",
        "match cfg:\n    case {\"epochs\": EPOCHS}:\n        pass",
        "match cfg:\n    case int() as EPOCHS:\n        pass",
        "with nullcontext(12) as EPOCHS:\n    pass",
        "for EPOCHS\tin [12]:\n    pass",
        "HELP = \"a \\\n b\"; EPOCHS = 12",
        "DOC = \"\"\"x \\\"\"\" y\"\"\"\nEPOCHS = 12",
        "LR = 0.5  # tuned\rEPOCHS = 12",
        "CFG = {\n  'a': 1,\n}; EPOCHS = 12",
        "EPOCHS \\\n= 12",
        // A second review's: strings that hid what followed them.
        "_ = \"\u{ff02}\"\nEPOCHS = 1000\n_ = \"\u{ff02}\"",
        "_ = \"\\\"(\"\nEPOCHS = 1000\n_ = \"\\\")\"",
        "_ = \"\\\"\"; EPOCHS = 1000",
    ]);
    let js = "const NUM_EPOCHS = 5; // five\nlet lr = 0.1;\n";
    let names = vec!["NUM_EPOCHS".to_string()];
    assert_eq!(
        fixed_changed(
            &names,
            "t.js",
            js,
            Some(&js.replace("lr = 0.1", "lr = 0.3"))
        ),
        None
    );
    assert!(fixed_changed(&names, "t.js", js, Some(&js.replace("5;", "60;"))).is_some());
    let c = "#define EPOCHS 5\nconst int SEED = 1;\n";
    assert!(fixed_changed(
        &fixed(),
        "t.c",
        c,
        Some(&c.replace("EPOCHS 5", "EPOCHS 50"))
    )
    .is_some());
    assert!(fixed_changed(&fixed(), "t.c", c, Some(&c.replace("= 1;", "= 2;"))).is_some());
    let rust = "pub const EPOCHS: usize = 5;\n";
    assert!(fixed_changed(
        &fixed(),
        "t.rs",
        rust,
        Some("pub const EPOCHS: usize = 6;\n")
    )
    .is_some());
    // An argument of a call is no assignment, on the call's line or on one of its own.
    let call = format!(
        "{OLD}train(\n    EPOCHS=EPOCHS,\n    lr=LR,\n)\nrun(EPOCHS=EPOCHS)\nok = EPOCHS == 5\n"
    );
    assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(&call)), None);
    let last_argument = format!("{OLD}train(\n    lr=LR,\n    EPOCHS=EPOCHS\n)\n");
    assert_eq!(
        fixed_changed(&fixed(), "t.py", OLD, Some(&last_argument)),
        None
    );
    // A bracket left open in a docstring hides nothing after it.
    let hidden = format!("{OLD}\"\"\"Notes\nsee (below\n\"\"\"\nEPOCHS = 60\n");
    assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&hidden)).is_some());
    let item = format!("{OLD}steps[EPOCHS] = 3\nlog(EPOCHS)[0] = 1\n");
    assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(&item)), None);
    // A value over several lines is read whole; `//` is Python's floor division.
    let budget = "TIME_BUDGET = 300 // 2\nSEEDS = [\n    1,\n    2,\n]\n";
    let names = vec!["TIME_BUDGET".to_string(), "SEEDS".to_string()];
    for changed in [
        budget.replace("// 2", "// 1"),
        budget.replace("    2,", "    3,"),
    ] {
        assert!(
            fixed_changed(&names, "t.py", budget, Some(&changed)).is_some(),
            "{changed}"
        );
    }
    // What an honest agent writes: keyword arguments however a call is laid out, a default
    // parameter, a lambda's default, an attribute of the same name, the name in a
    // docstring, a formatter's respacing and quotes.
    let honest = format!(
        "{OLD}val = train(lr=LR * 0.5,\n            EPOCHS=EPOCHS)\ndef f(\n  m,\n  EPOCHS=EPOCHS):\n    return m\n\
         g = lambda EPOCHS=EPOCHS: EPOCHS\nself.EPOCHS = 3\n\"\"\"\nEPOCHS = 5 is fixed by the harness.\n\"\"\"\n"
    );
    assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(&honest)), None);
    let list = "SEEDS = [0,1,2]\nNAME = 'cpu'\n";
    let names = vec!["SEEDS".to_string(), "NAME".to_string()];
    let formatted = "SEEDS = [0, 1, 2]\nNAME = \"cpu\"\n";
    assert_eq!(fixed_changed(&names, "t.py", list, Some(formatted)), None);
    // Another file (a new one, or one that did not) assigning it: `from tweaks import *`.
    let why = fixed_changed(&fixed(), "tweaks.py", "", Some("EPOCHS = 30\n")).unwrap();
    assert!(
        why.starts_with("assigns `EPOCHS` in `tweaks.py` (`=30`), which did not before"),
        "{why}"
    );
    assert_eq!(
        fixed_changed(&fixed(), "tweaks.py", "", Some("LR = 3\n")),
        None
    );
    // A file Python would decode otherwise than hone reads it.
    let utf7 = format!("# -*- coding: utf-7 -*-\n{OLD}# tuned +AAo-EPOCHS = 12\n");
    assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&utf7))
        .unwrap()
        .contains("declares the encoding `utf-7`"));
    let utf8 = format!("# -*- coding: utf-8 -*-\n{OLD}");
    assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(&utf8)), None);
    // A fourth review's: one-line headers, fields of f-strings over lines, CRLF lines, a
    // coding cookie after another "coding".
    assert_caught(&[
        "with nullcontext(12) as EPOCHS: pass",
        "except E as EPOCHS: pass",
        "match 60:\n    case EPOCHS: pass",
        "if (EPOCHS := 12): pass",
        "while (EPOCHS := 60) < 0: pass",
        "def g(a=(EPOCHS := 60)): pass",
        "print(f\"\"\"\n{(EPOCHS := 12)}\"\"\")",
        "S = 'a\\\r\n'; EPOCHS = 12",
        "EPOCHS \\\r\n= 60",
    ]);
    let hidden = format!("# the coding style; coding: utf-7\n{OLD}");
    assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&hidden)).is_some());
    // ...and honest f-strings and cases that bind nothing: a debug `=`, an alignment spec,
    // a quote as fill, Python 3.12's quotes in a field, a guard, `case` as a name.
    let honest_f = format!(
        "{OLD}msg = f\"{{EPOCHS=}} {{LR=}}\"\nm2 = f\"{{EPOCHS:=10}} {{SEED:=+8d}}\"\nm3 = f\"{{x:'^9}}\"\nm4 = f\"lr {{cfg[\"lr\"]}}\"\nmatch v:\n    case v if v > EPOCHS:\n        pass\ncase = {{EPOCHS: 1}}\nok = 1 if\"a\" else 2\n"
    );
    assert_eq!(
        fixed_changed(&fixed(), "t.py", OLD, Some(&honest_f)),
        None,
        "{honest_f}"
    );
    // Honest uses in those forms bind nothing: an f-string printing it, a case on a value.
    let honest = format!(
        "{OLD}print(f\"epochs: {{EPOCHS}} {{{{braces}}}}\")\nmatch x:\n    case Cfg.EPOCHS:\n        pass\nwith open(p) as f:\n    pass\n"
    );
    assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(&honest)), None);
    // What an honest change does with a constant another editable file keeps: import it
    // with more names, have a formatter lay the import out, read it in a new helper; and
    // a new document that quotes it.
    let reading = "from config import EPOCHS, LR\n";
    for honest in [
        "from config import EPOCHS, LR, WD\n",
        "from config import (\n    EPOCHS,\n    LR,\n)\n",
    ] {
        assert_eq!(
            fixed_changed(&fixed(), "train.py", reading, Some(honest)),
            None,
            "{honest}"
        );
    }
    let other = "from other import EPOCHS, LR\n";
    assert!(fixed_changed(&fixed(), "train.py", reading, Some(other)).is_some());
    assert_eq!(
        fixed_changed(
            &fixed(),
            "helpers.py",
            "",
            Some("from config import EPOCHS\n")
        ),
        None
    );
    assert_eq!(
        fixed_changed(
            &fixed(),
            "NOTES.md",
            "",
            Some("EPOCHS = 10 stays as it is\n")
        ),
        None
    );
    // Reading it in an import line, or naming a module like it, is not binding it.
    let reads = format!("{OLD}from config import EPOCHS_DONE\nimport EPOCHS_lib.x\n");
    assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(&reads)), None);
    // A second assignment of the same value is said as one.
    let twice = format!("{OLD}EPOCHS = 5\n");
    assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&twice))
        .unwrap()
        .starts_with("assigns `EPOCHS` in `t.py` once more (`=5`)"));
    // A changed line that uses one is worth a look, not a violation.
    let used = format!("{OLD}for ep in range(EPOCHS * 4):\n    pass\n");
    assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(&used)), None);
    assert_eq!(
        fixed_used(&fixed(), OLD, &used),
        Some((
            "EPOCHS".to_string(),
            "for ep in range(EPOCHS * 4):".to_string()
        ))
    );
    assert_eq!(
        fixed_used(&fixed(), OLD, &format!("{OLD}EPOCHS_DONE = 1\n")),
        None
    );
    // A file that holds none of them keeps nothing.
    assert_eq!(fixed_changed(&fixed(), "u.py", "LR = 1\n", None), None);
}

#[test]
fn a_name_local_to_a_function_or_class_of_a_file_that_did_not_bind_it_is_another_name() {
    let new_file = |text: &str| fixed_changed(&fixed(), "helper.py", "", Some(text));
    // A helper's own EPOCHS (an agent's new file, or one that did not bind it) leaves the
    // module's alone; so does a class attribute, a method's local, a tab-indented body.
    for local in [
        "def helper(n):\n    EPOCHS = n * 2\n    return EPOCHS\n",
        "class Cfg:\n    EPOCHS = 3\n",
        "class A:\n    def f(self):\n        for EPOCHS in range(3): pass\n",
        "def f():\n\tEPOCHS = 1\n\n\treturn EPOCHS\n",
        "async def f():\n    EPOCHS = 1\n",
    ] {
        assert_eq!(new_file(local), None, "{local}");
    }
    // At module level (under an `if` too, after a function ended), through `global`, or in a
    // header's default value, it is the module's.
    for module in [
        "EPOCHS = 3\n",
        "if True:\n    EPOCHS = 3\n",
        "def f():\n    x = 1\nEPOCHS = 3\n",
        "def f():\n    global EPOCHS\n    EPOCHS = 3\n",
        "def f():\n    global SEED, EPOCHS\n    EPOCHS = 3\n",
        "def g(a=(EPOCHS := 60)): pass\n",
        "class A:\n    pass\nfor EPOCHS in [1]: pass\n",
    ] {
        assert!(new_file(module).is_some(), "missed: {module}");
    }
    // Python's own reading: a form feed sets the column back to 0 (module level again);
    // `global` after a one-line block's `:` or over a `\` join declares it all the same; a
    // statement cut at hone's 64 KiB bound leaves scopes unread, so every binding counts.
    let long = format!(
        "def f(a=[{}\n    (EPOCHS := 60)]): pass\n",
        "0,".repeat(40_000)
    );
    let cut = format!("{OLD}_x = [{}\n]; EPOCHS = 60\n", "0,".repeat(40_000));
    assert!(
        fixed_changed(&fixed(), "t.py", OLD, Some(&cut)).is_some(),
        "missed the assignment after a cut statement"
    );
    for module in [
        "def f():\n    x = 1\n\x0cEPOCHS = 60\n".to_string(),
        "def _t():\n    if 1: global EPOCHS\n    EPOCHS = 60\n".to_string(),
        "def _t():\n    global \\\n        EPOCHS\n    EPOCHS = 60\n".to_string(),
        long,
    ] {
        assert!(new_file(&module).is_some(), "missed: {module:.80}");
    }
    // Beside the module's own EPOCHS, a local one is a violation all the same: in a function
    // that reads the constant, it changes what that function sees.
    for local in [
        format!("{OLD}def f():\n    EPOCHS = 3\n    return EPOCHS\n"),
        "LR = 0.1\nEPOCHS = 5\nSEED = 42\ndef main():\n    EPOCHS = 60\n    print(LR)\n"
            .to_string(),
    ] {
        assert!(
            fixed_changed(&fixed(), "t.py", OLD, Some(&local)).is_some(),
            "missed: {local}"
        );
    }
    // A constant that lives in a function is compared there, and then every binding counts.
    let inside = "def main():\n    EPOCHS = 5\n    train(EPOCHS)\n";
    for changed in [
        inside.replace("= 5", "= 50"),
        format!("{inside}def g():\n    EPOCHS = 1\n"),
    ] {
        assert!(
            fixed_changed(&fixed(), "t.py", inside, Some(&changed)).is_some(),
            "missed: {changed}"
        );
    }
}

#[test]
fn a_statement_cut_at_the_bound_keeps_the_lines_after_it_small() {
    // A megabyte of `(` then short lines: each piece after the cut starts with at most
    // 64 brackets, so what is read stays about the size of the file.
    let text = format!("x = {}\n{}", "(".repeat(1 << 20), "y\n".repeat(200));
    let read: usize = logical_lines(&text, false).iter().map(String::len).sum();
    assert!(read < 8 * text.len(), "{read} bytes read of {}", text.len());
}
