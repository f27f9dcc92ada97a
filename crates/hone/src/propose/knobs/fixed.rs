//! `[loop] fixed`: constants of the editable files that must keep the values they had when the
//! run started (a time budget, a run length, a seed). A change to one makes the candidate a
//! `violation`: a longer run or a luckier seed is not an improvement of the project.

/// How a candidate's file `path` treats the `fixed` constants its parent's version (`old`)
/// assigns: the first one assigned otherwise than before (another value, a second assignment
/// further down, an augmented one, none left), or held by a deleted file (`new` is `None`),
/// said for the record. A name the parent's file does not assign is not this file's to keep.
/// Lines are compared as written (comments and spacing aside), at any indentation: a best
/// effort against an agent that edits the constant, not against code written to get around it
/// (put such a constant in a protected file for that).
pub fn fixed_changed(fixed: &[String], path: &str, old: &str, new: Option<&str>) -> Option<String> {
    for name in fixed {
        let before = assignments(old, name);
        let Some(first) = before.first() else {
            continue;
        };
        let Some(new) = new else {
            return Some(format!(
                "deleted `{path}`, which holds `{name}`: [loop] fixed keeps it as the run started"
            ));
        };
        let after = assignments(new, name);
        if after == before {
            continue;
        }
        return Some(match after.iter().find(|a| !before.contains(a)) {
            Some(changed) => format!(
                "changed `{name}` in `{path}` from `{first}` to `{changed}`: [loop] fixed keeps it as the run started"
            ),
            None => format!(
                "no longer assigns `{name}` in `{path}` as it did (`{first}`): [loop] fixed keeps it as the run started"
            ),
        });
    }
    None
}

/// The assignments to `name` in `text`, one per line that makes one (`NAME = 5`, `NAME: int =
/// 5`, `NAME *= 2`, at any indentation), each as `= 5` or `*= 2`: the operator and what
/// follows it, comments cut and spaces collapsed.
fn assignments(text: &str, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let code = line.split('#').next().unwrap_or("").trim_start();
        let Some(rest) = code.strip_prefix(name) else {
            continue;
        };
        if rest.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        // A type annotation (`NAME: int = 5`) stands before the operator.
        let rest = match rest.trim_start().strip_prefix(':') {
            Some(annotated) => match annotated.find('=') {
                Some(i) => &annotated[i..],
                None => continue,
            },
            None => rest.trim_start(),
        };
        let op_len = rest.find('=').filter(|&i| {
            let op = &rest[..i];
            op.len() <= 2 && op.chars().all(|c| "+-*/%&|^<>@".contains(c))
        });
        let Some(i) = op_len else { continue };
        // `==` compares; `<=` and `>=` too.
        if rest[i + 1..].starts_with('=') || matches!(&rest[..i], "<" | ">") {
            continue;
        }
        let value = rest[i + 1..]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        out.push(format!("{}= {value}", &rest[..i]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixed() -> Vec<String> {
        vec!["EPOCHS".into(), "SEED".into()]
    }

    const OLD: &str = "LR = 0.1\nEPOCHS = 5\nSEED = 42\nprint(LR)\n";

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
            "changed `EPOCHS` in `t.py` from `= 5` to `= 60`: [loop] fixed keeps it as the run started"
        );
        let seed = OLD.replace("SEED = 42", "SEED = 7");
        assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&seed))
            .unwrap()
            .contains("`SEED`"));
        let gone = OLD.replace("EPOCHS = 5\n", "");
        assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&gone))
            .unwrap()
            .starts_with("no longer assigns `EPOCHS` in `t.py` as it did (`= 5`)"));
        assert!(fixed_changed(&fixed(), "t.py", OLD, None)
            .unwrap()
            .starts_with("deleted `t.py`"));
        // Assigned again further down: the later value counts too.
        let again = format!("{OLD}EPOCHS = 60\n");
        assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&again)).is_some());
        let inside = format!("{OLD}def main():\n    global EPOCHS\n    EPOCHS *= 12\n");
        assert!(fixed_changed(&fixed(), "t.py", OLD, Some(&inside))
            .unwrap()
            .contains("to `*= 12`"));
        // Reading it is no assignment; nor is a comparison, nor a longer name.
        let reads = format!("{OLD}if EPOCHS == 5 or EPOCHS <= 3: EPOCHS_DONE = 1\nprint(EPOCHS)\n");
        assert_eq!(fixed_changed(&fixed(), "t.py", OLD, Some(&reads)), None);
        let annotated = "EPOCHS: int = 5\n";
        assert!(fixed_changed(&fixed(), "t.py", annotated, Some("EPOCHS: int = 6\n")).is_some());
        // A file that holds none of them keeps nothing.
        assert_eq!(fixed_changed(&fixed(), "u.py", "LR = 1\n", None), None);
    }
}
