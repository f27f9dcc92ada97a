//! Run tags: a tag names a run and becomes its branch `hone/<tag>`, so it must be a name git
//! accepts. One check, shared by the spec (`[[schedule]] tag`) and the engine (`--tag`).

/// `Ok` when `tag` is usable; else the problem, as a sentence naming the tag.
pub fn check(tag: &str) -> Result<(), String> {
    let problem = if tag.is_empty() || tag.len() > 64 {
        Some("it must have 1 to 64 characters")
    } else if !tag
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        Some("use only letters, digits, '-', '_' and '.'")
    } else if tag.starts_with(['.', '-']) {
        Some("it must not start with '.' or '-'")
    } else if tag.contains("..") || tag.ends_with(".lock") || tag.ends_with('.') {
        Some("git forbids '..', a trailing '.' and a trailing \".lock\" in branch names")
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(p) => Err(format!(
            "`{tag}` is not a usable tag: {p} (it becomes branch hone/{tag})"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_must_be_branch_names() {
        assert_eq!(check("nightly-20260101-0000"), Ok(()));
        assert_eq!(
            check("bad tag"),
            Err("`bad tag` is not a usable tag: use only letters, digits, '-', '_' and '.' (it becomes branch hone/bad tag)".into())
        );
        assert!(check("").is_err());
        assert!(check(".x").is_err());
        assert!(check("a..b").is_err());
        assert!(check("x.lock").is_err());
        assert!(check(&"a".repeat(65)).is_err());
    }
}
