//! The `[verify] progress` setting `hone init` suggests: a training script that prints a step
//! and a loss-like value as it goes (`print(f"step {step} | loss: {loss:.4f}")`) gets the
//! regex that reads those lines, so that its runs' curves are recorded (and `prune` can stop
//! hopeless ones) from the first run.

use crate::propose::knobs;

/// A suggested `progress` setting and why (the comment written next to it).
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// The regex, with groups `step` and `value`.
    pub regex: String,
    /// The name of the value it reads (`loss`).
    pub name: String,
    /// `train.py:42`.
    pub at: String,
}

/// The first f-string `print` of `text` (the script `script`) that prints a `step` number
/// and, after it, a `name: {value}` or `name={value}` with a metric word in its name, as a
/// regex reading both.
pub fn find(script: &str, text: &str) -> Option<Progress> {
    text.lines().enumerate().find_map(|(i, line)| {
        let (regex, name) = line_regex(line)?;
        Some(Progress {
            regex,
            name,
            at: format!("{script}:{}", i + 1),
        })
    })
}

/// The regex for one source line, and the value's name, if the line prints a step and a
/// metric-like value in an f-string.
fn line_regex(line: &str) -> Option<(String, String)> {
    let at = line
        .find("print(f\"")
        .map(|p| p + 8)
        .or_else(|| line.find("print(f'").map(|p| p + 8))?;
    let quote = line[..at].chars().last()?;
    let body = &line[at..];
    let body = &body[..body.find(quote)?];
    let mut regex = String::new();
    let mut seen_step = false;
    let mut rest = body;
    while let Some(open) = rest.find('{') {
        let literal = unescape(&rest[..open]);
        let close = open + rest[open..].find('}')?;
        let expr = rest[open + 1..close].split([':', '!', '=']).next()?.trim();
        let label = label_before(&literal);
        regex.push_str(&regex::escape(&literal));
        if !seen_step && (label.eq_ignore_ascii_case("step") || expr == "step") {
            regex.push_str(r"(?P<step>\d+)");
            seen_step = true;
        } else if seen_step && is_metric(&label) {
            regex.push_str(r"(?P<value>[0-9.eE+-]+)");
            return Some((regex.trim_start().to_string(), label));
        } else {
            regex.push_str(".*?");
        }
        rest = &rest[close + 1..];
    }
    None
}

/// The word a placeholder follows: `loss` in `| loss: `, `step` in `step `.
fn label_before(literal: &str) -> String {
    let trimmed = literal.trim_end().trim_end_matches([':', '=']).trim_end();
    trimmed
        .rsplit(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .next()
        .unwrap_or_default()
        .to_string()
}

/// A name with a metric word in it (`loss`, `train_loss`, `val_bpb`).
fn is_metric(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    !lower.is_empty()
        && lower
            .split('_')
            .any(|w| knobs::infer::METRIC_WORDS.contains(&w))
}

/// The printed text of an f-string's literal part: `\r`, `\n` and `\t` are line ends or
/// spacing the regex need not match, `{{` and `}}` are braces.
fn unescape(literal: &str) -> String {
    literal
        .replace("\\r", "")
        .replace("\\n", "")
        .replace("\\t", " ")
        .replace("{{", "{")
        .replace("}}", "}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autoresearch_progress_line_gets_a_regex_that_reads_it() {
        let script = "for step in range(n):\n    loss = train()\n    print(f\"\\rstep {step:05d} ({pct_done:.1f}%) | loss: {debiased_smooth_loss:.6f} | lrm: {lrm:.2f} | dt: {dt*1000:.0f}ms\", end=\"\", flush=True)\nprint(f\"val_bpb: {val_bpb:.6f}\")\n";
        let p = find("train.py", script).expect("a progress line");
        assert_eq!(p.at, "train.py:3");
        assert_eq!(p.name, "loss");
        let re = regex::Regex::new(&p.regex).expect("a valid regex");
        let printed = "step 00042 (12.5%) | loss: 3.250000 | lrm: 1.00 | dt: 312ms";
        let c = re.captures(printed).expect("it reads the printed line");
        assert_eq!(&c["step"], "00042");
        assert_eq!(&c["value"], "3.250000");
    }

    #[test]
    fn key_value_and_colon_forms_are_read_and_a_line_without_a_step_is_not() {
        let p = find("t.py", "print(f'step={i} train_loss={l:.3f} lr={lr}')").expect("read");
        let c = regex::Regex::new(&p.regex)
            .unwrap()
            .captures("step=7 train_loss=0.125 lr=0.1")
            .unwrap();
        assert_eq!((&c["step"], &c["value"]), ("7", "0.125"));
        assert_eq!(p.name, "train_loss");
        let p = find("t.py", "    print(f\"Step {it}: loss {loss.item():.4f}\")").expect("read");
        let c = regex::Regex::new(&p.regex)
            .unwrap()
            .captures("Step 12: loss 2.5000")
            .unwrap();
        assert_eq!((&c["step"], &c["value"]), ("12", "2.5000"));
        assert_eq!(find("t.py", "print(f\"val_bpb: {v:.6f}\")"), None);
        assert_eq!(find("t.py", "print(f\"epoch {e} loss: {l}\")"), None);
    }
}
