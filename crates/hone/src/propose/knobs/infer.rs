//! File-level inference: rules that look at how a file uses its knobs, applied after each
//! unannotated knob got its domain from its own name and value (`line::inferred_domain`).
//!
//! - A constant used only to print something (every line that names it is a labelled `print(`
//!   line, or assigns a variable that is itself only printed so) is fixed: changing it changes
//!   a printout, not the result (`H100_BF16_PEAK_FLOPS` in an `mfu_percent:` line). A print
//!   labelled like a result (`score:`, `val_bpb:`, `loss:`...) or with no label may be what
//!   the verifier reads: a constant in one stays a knob.
//! - A divisibility check `A % (B * C) == 0` keeps itself true: the integer knobs in the
//!   divisor only move down by factors of two that divide them (`128` → `32`, `64`, `128`), and
//!   a knob dividend only up by factors of two (`2**19` → `2**19`, `2**20`, `2**21`). Then the
//!   divisor still divides the dividend whatever the search picks; a divisor with no such factor
//!   is fixed.
//!
//! Annotated knobs are never changed here.

use super::{Domain, Knob, KnobValue};

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Whether `word` occurs in `line` as a whole identifier.
fn mentions(line: &str, word: &str) -> bool {
    line.match_indices(word).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + word.len()..].chars().next();
        !before.is_some_and(|c| is_ident_char(c) || c == '.') && !after.is_some_and(is_ident_char)
    })
}

/// The code of a line: without a trailing `#` comment (naively: a `#` inside a string cuts it
/// too, which only makes a line look shorter).
fn code(line: &str) -> &str {
    line.split('#').next().unwrap_or(line)
}

/// Words in a printed name that mark it as a result (`val_bpb`, `score`, `loss`); `hone init`
/// looks for the objective among the names holding one.
pub(crate) const METRIC_WORDS: &[&str] = &[
    "bpb",
    "loss",
    "acc",
    "accuracy",
    "score",
    "error",
    "err",
    "perplexity",
    "ppl",
    "f1",
    "auc",
    "rmse",
    "mse",
    "mae",
    "reward",
    "bleu",
];

/// Words of a printed label that may name the objective besides [`METRIC_WORDS`]: a constant
/// printed under such a label may be what the verifier reads, so it stays a knob.
const RESULT_WORDS: &[&str] = &["objective", "metric", "result", "value"];

/// Where `print(` stands on `line` (callers check what is before it), the label its string
/// starts with and the text after the label: `print(f"val_bpb: {x}")` gives `val_bpb` and
/// `: {x}")`; also with an `r` prefix or single quotes. `None` when the line has no `print(`
/// followed by a string.
pub(crate) fn print_label(line: &str) -> Option<(usize, &str, &str)> {
    let at = line.find("print(")?;
    let rest = &line[at + "print(".len()..];
    let rest = rest
        .strip_prefix('f')
        .or_else(|| rest.strip_prefix('r'))
        .unwrap_or(rest);
    let rest = rest.strip_prefix('"').or_else(|| rest.strip_prefix('\''))?;
    let end = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
    let (label, after) = rest.split_at(end);
    Some((at, label, after))
}

/// Whether `line` prints a labelled value that is not a result: `print(f"mfu_percent: {x}")`.
/// An unlabelled print, or one labelled like a result (`score:`), is not.
fn is_print(line: &str) -> bool {
    let Some((at, label, after)) = print_label(line) else {
        return false;
    };
    if at > 0 && line[..at].ends_with(is_ident_char) {
        return false;
    }
    let label = label.to_ascii_lowercase();
    !label.is_empty()
        && after.trim_start().starts_with(':')
        && !label
            .split('_')
            .any(|w| METRIC_WORDS.contains(&w) || RESULT_WORDS.contains(&w))
}

/// The variable a line assigns (`name = ...`, any indentation), if any.
fn assigned(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let end = t.find(|c: char| !is_ident_char(c))?;
    let (name, rest) = t.split_at(end);
    let rest = rest.trim_start();
    (!name.is_empty() && rest.starts_with('=') && !rest.starts_with("=="))
        .then_some(name)
        .filter(|n| !n.starts_with(|c: char| c.is_ascii_digit()))
}

/// Whether every line (other than the definition) that names `name` only prints it, directly
/// or through one variable that is only printed. A name never used is not "only printed": it
/// may be read by another file.
fn only_printed(lines: &[&str], name: &str, definition: usize) -> bool {
    let uses: Vec<(usize, &str)> = lines
        .iter()
        .enumerate()
        .filter(|(i, l)| *i != definition && mentions(code(l), name))
        .map(|(i, l)| (i, code(l)))
        .collect();
    !uses.is_empty()
        && uses.iter().all(|(i, l)| {
            is_print(l)
                || assigned(l).is_some_and(|var| {
                    let var_uses: Vec<&str> = lines
                        .iter()
                        .enumerate()
                        .filter(|(j, m)| j != i && mentions(code(m), var))
                        .map(|(_, m)| code(m))
                        .collect();
                    !var_uses.is_empty()
                        && var_uses
                            .iter()
                            .all(|m| is_print(m) || assigned(m) == Some(var))
                })
        })
}

/// The divisibility checks of a file: `(dividend, divisor names)` for each `A % (B * C) == 0`
/// (or `A % B == 0`) whose divisor is a product of names and numbers.
fn divisibility(lines: &[&str]) -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for line in lines {
        let line = code(line);
        for (at, _) in line.match_indices('%') {
            let before = line[..at].trim_end();
            let dividend: String = before
                .chars()
                .rev()
                .take_while(|c| is_ident_char(*c))
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            let after = line[at + 1..].trim_start();
            let (divisor, rest) = if let Some(inner) = after.strip_prefix('(') {
                match inner.find(')') {
                    Some(close) => (&inner[..close], &inner[close + 1..]),
                    None => continue,
                }
            } else {
                let end = after
                    .find(|c: char| !is_ident_char(c))
                    .unwrap_or(after.len());
                after.split_at(end)
            };
            let rest = rest.trim_start();
            let compared_to_zero = rest
                .strip_prefix("==")
                .is_some_and(|r| r.trim_start().starts_with('0'));
            let product = divisor
                .chars()
                .all(|c| is_ident_char(c) || c == '*' || c == ' ');
            if dividend.is_empty() || !compared_to_zero || !product || divisor.contains("**") {
                continue;
            }
            let names = divisor
                .split('*')
                .map(str::trim)
                .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_'))
                .map(str::to_string)
                .collect();
            out.push((dividend, names));
        }
    }
    out
}

/// `n / 4`, `n / 2`, `n` where they divide evenly (a divisor that may only shrink).
fn shrinking(n: i64) -> Domain {
    let mut values = vec![KnobValue::Int(n)];
    let mut m = n;
    for _ in 0..2 {
        if m % 2 != 0 || m / 2 == 0 {
            break;
        }
        m /= 2;
        values.insert(0, KnobValue::Int(m));
    }
    if values.len() < 2 {
        Domain::Fixed
    } else {
        Domain::Choice(values)
    }
}

/// `n`, `2n`, `4n` (a dividend that may only grow).
fn growing(n: i64) -> Domain {
    let values: Vec<KnobValue> = [1, 2, 4]
        .iter()
        .filter_map(|f| n.checked_mul(*f).map(KnobValue::Int))
        .collect();
    if values.len() < 2 {
        Domain::Fixed
    } else {
        Domain::Choice(values)
    }
}

/// Applies the file-level rules (module docs) to the unannotated knobs of `text`.
pub(crate) fn refine(text: &str, knobs: &mut [&mut Knob]) {
    let lines: Vec<&str> = text.lines().collect();
    for k in knobs.iter_mut() {
        if k.annotated || k.domain == Domain::Fixed {
            continue;
        }
        let name = k.name.split('[').next().unwrap_or(&k.name);
        if only_printed(&lines, name, k.line - 1) {
            k.domain = Domain::Fixed;
        }
    }
    for (dividend, divisors) in divisibility(&lines) {
        for k in knobs.iter_mut() {
            let KnobValue::Int(n) = k.value else {
                continue;
            };
            if k.annotated || k.domain == Domain::Fixed || n <= 0 {
                continue;
            }
            if k.name == dividend {
                k.domain = growing(n);
            } else if divisors.contains(&k.name) {
                k.domain = shrinking(n);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::discover;
    use super::*;

    fn domain(text: &str, name: &str) -> Domain {
        let knobs = discover("t.py", text).unwrap_or_default();
        knobs
            .into_iter()
            .find(|k| k.name == name)
            .map(|k| k.domain)
            .unwrap_or_else(|| panic!("no knob {name}"))
    }

    #[test]
    fn a_constant_only_printed_is_fixed() {
        let text = "PEAK = 989.5e12\nLR = 0.1\nPOW = 2.0\n\
                    loss = LR * 2\nmfu = 100 * loss / PEAK\nprint(f\"mfu: {mfu}\")\n\
                    print(f\"pow: {POW:.1f}\")  # only printed\nprint('loss:', loss)\n";
        assert_eq!(domain(text, "PEAK"), Domain::Fixed, "through one variable");
        assert_eq!(domain(text, "POW"), Domain::Fixed, "directly");
        assert!(
            matches!(domain(text, "LR"), Domain::Float { .. }),
            "feeds the result"
        );
        // Never used in the file (another file may read it): a knob as before.
        assert!(matches!(
            domain("WIDTH = 0.5\n", "WIDTH"),
            Domain::Float { .. }
        ));
        // Printed as the result, or printed with no label: it may be the objective.
        for script in [
            "X = 0.5\nprint('score: %.9g' % ((X - 0.3) ** 2))\n",
            "X = 0.5\nprint(f\"val_bpb: {X * 2}\")\n",
            "X = 0.5\nprint((X - 0.3) ** 2)\n",
        ] {
            assert!(
                matches!(domain(script, "X"), Domain::Float { .. }),
                "{script}"
            );
        }
    }

    #[test]
    fn a_divisibility_check_stays_true() {
        let text = "TOTAL = 2**19\nDEVICE = 128\nODD = 3\n\
                    assert TOTAL % (DEVICE * SEQ) == 0\nassert TOTAL % ODD == 0\n";
        let ints = |v: &[i64]| Domain::Choice(v.iter().map(|n| KnobValue::Int(*n)).collect());
        assert_eq!(domain(text, "TOTAL"), ints(&[1 << 19, 1 << 20, 1 << 21]));
        assert_eq!(domain(text, "DEVICE"), ints(&[32, 64, 128]));
        assert_eq!(domain(text, "ODD"), Domain::Fixed);
        // Not a product, or not compared to zero: left alone.
        let other = "A = 64\nB = 32\nx = A % (B + 1) == 0\ny = A % B\n";
        assert!(matches!(domain(other, "A"), Domain::Choice(v) if v.len() == 5));
        // An annotation wins.
        let annotated = "A = 64  # hone: int 1..100\nB = 32\nassert A % B == 0\n";
        assert!(matches!(domain(annotated, "A"), Domain::Int { .. }));
    }
}
