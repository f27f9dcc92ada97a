//! Whether two scope globs of `[loop]` (`editable`, `protected`, `pinned`) can name a common
//! path, with the semantics of [`crate::workspace::glob_match`]: `*` and `?` stay within one
//! segment, `**` crosses segments, and a plain directory (or a glob ending in `/`) covers
//! everything under it (a plain name with a dot, such as `prepare.py`, is taken for a file). Used to refuse a file that would be both editable and protected.
//!
//! Both sides may be globs, so this intersects the two patterns (no path is enumerated) with
//! two bottom-up tables (segments, then the characters of two segments), without recursion;
//! the work is bounded by a [`Budget`] shared by every pair a spec compares, whatever its input.

/// Work left for comparing a spec's globs (table cells); past it the check gives up.
pub(super) struct Budget(u64);

impl Default for Budget {
    /// Enough for hundreds of ordinary globs on each side, in milliseconds.
    fn default() -> Budget {
        Budget(5_000_000)
    }
}

impl Budget {
    fn spend(&mut self, cells: usize) -> Option<()> {
        self.0 = self.0.checked_sub(cells as u64)?;
        Some(())
    }
}

/// Can some path match both `a` and `b`? `None`: the budget ran out before the answer.
pub(super) fn globs_overlap(a: &str, b: &str, budget: &mut Budget) -> Option<bool> {
    let (Some(a), Some(b)) = (segments(a), segments(b)) else {
        return Some(false);
    };
    budget.spend((a.len() + 1).saturating_mul(b.len() + 1))?;
    meets(
        &a,
        &b,
        |s| *s == "**",
        |x, y| segment_overlap(x.as_bytes(), y.as_bytes(), budget),
    )
}

/// The pattern's segments; a directory pattern gets a trailing `**`. `None`: it matches
/// nothing (as `glob_match` says of an empty pattern).
fn segments(pattern: &str) -> Option<Vec<&str>> {
    let pat = pattern.trim_start_matches("./");
    let dir = pat.trim_end_matches('/');
    if dir.is_empty() {
        return None;
    }
    let mut segs: Vec<&str> = dir.split('/').collect();
    let globbed = dir.contains(['*', '?', '[']);
    // A plain name with a dot (`prepare.py`) is taken for the file it almost surely is, not
    // for a directory (`glob_match` would also match `prepare.py/x`): else `**/*.py` would
    // overlap every protected file.
    let file_like = !globbed && !pat.ends_with('/') && segs.last().is_some_and(|l| l.contains('.'));
    if (!globbed || pat.ends_with('/')) && !file_like {
        segs.push("**");
    }
    Some(segs)
}

/// Can one segment match both `*`/`?` patterns `a` and `b`?
fn segment_overlap(a: &[u8], b: &[u8], budget: &mut Budget) -> Option<bool> {
    let compatible = |x: &u8, y: &u8| *x == b'?' || *y == b'?' || x == y;
    if !a.contains(&b'*') && !b.contains(&b'*') {
        budget.spend(a.len().max(1))?;
        return Some(a.len() == b.len() && a.iter().zip(b).all(|(x, y)| compatible(x, y)));
    }
    budget.spend((a.len() + 1).saturating_mul(b.len() + 1))?;
    meets(a, b, |c| *c == b'*', |x, y| Some(compatible(x, y)))
}

/// Whether the sequences `a` and `b` share a match, where a `star` element matches any run of
/// elements and two others match when `pair` says so (`None`: the budget ran out). A
/// bottom-up table: `meet[i][j]`, `a[i..]` and `b[j..]` share a match, filled from the ends.
fn meets<T>(
    a: &[T],
    b: &[T],
    star: impl Fn(&T) -> bool,
    mut pair: impl FnMut(&T, &T) -> Option<bool>,
) -> Option<bool> {
    let w = b.len() + 1;
    let mut meet = vec![false; (a.len() + 1) * w];
    for i in (0..=a.len()).rev() {
        for j in (0..=b.len()).rev() {
            meet[i * w + j] = match (a.get(i), b.get(j)) {
                (None, None) => true,
                (Some(x), _) if star(x) => {
                    meet[(i + 1) * w + j] || (j < b.len() && meet[i * w + j + 1])
                }
                (_, Some(y)) if star(y) => {
                    meet[i * w + j + 1] || (i < a.len() && meet[(i + 1) * w + j])
                }
                (Some(x), Some(y)) => meet[(i + 1) * w + j + 1] && pair(x, y)?,
                _ => false,
            };
        }
    }
    Some(meet[0])
}

#[cfg(test)]
mod tests {
    use super::{globs_overlap as overlap, Budget};
    use crate::workspace::glob_match;

    fn globs_overlap(a: &str, b: &str) -> bool {
        overlap(a, b, &mut Budget::default()).unwrap()
    }

    #[test]
    fn overlaps_through_globs_and_directories() {
        for (a, b) in [
            ("train.py", "train.py"),
            ("*.py", "prepare.py"),
            ("model/*.py", "model/a.py"),
            ("src/", "src/lib/x.rs"),
            ("src", "src/x.rs"),
            ("**/*.py", "a/b/c.py"),
            ("*.py", "t*"),
            ("a?c", "*c"),
            ("model/**", "model/x/y.bin"),
        ] {
            assert!(globs_overlap(a, b), "{a} / {b}");
            assert!(globs_overlap(b, a), "{b} / {a}");
        }
        for (a, b) in [
            ("train.py", "prepare.py"),
            ("*.py", "*.rs"),
            ("model/*.py", "model/x/a.py"),
            ("src/", "test/x.rs"),
            ("a?c", "abcd"),
            ("", "x"),
            ("**/*.py", "prepare.sh"),
        ] {
            assert!(!globs_overlap(a, b), "{a} / {b}");
            assert!(!globs_overlap(b, a), "{b} / {a}");
        }
        // A literal path on one side: the same answer as glob_match.
        for (pat, path) in [
            ("model/*.py", "model/a.py"),
            ("data/", "data/x"),
            ("*.py", "a/b.py"),
        ] {
            assert_eq!(
                globs_overlap(pat, path),
                glob_match(pat, path),
                "{pat} / {path}"
            );
        }
    }

    #[test]
    fn long_patterns_stay_fast() {
        let a = "*a".repeat(500);
        let b = "*b".repeat(500);
        assert!(!globs_overlap(&format!("{a}/x"), &format!("{b}/y")));
        let deep = "**/".repeat(500);
        assert!(globs_overlap(&format!("{deep}x"), &format!("{deep}x")));
        // Past the budget: no answer, quickly, and no deep recursion.
        let huge = "a/".repeat(200_000);
        assert_eq!(overlap(&huge, &huge, &mut Budget::default()), None);
    }
}
