//! `[sandbox]`: resource limits for the agent's and the verifier's processes, and whether they
//! run under bubblewrap (with or without the network).

use super::read::{Section, Size};
use super::SpecError;

/// The keys of `[sandbox]`.
pub(super) const KEYS: &[&str] = &[
    "kind",
    "memory",
    "cpu_time",
    "max_output",
    "max_processes",
    "network",
    "required",
];

/// `[sandbox]`: resource limits for the agent's and the verifier's processes.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct SandboxSpec {
    /// Run agent, reviewer, verifier and holdout processes under bubblewrap (`crate::sandbox`).
    pub bwrap: bool,
    /// With bwrap: may the verifier reach the network? (Agents and reviewers always may, the
    /// holdout never.)
    pub network: bool,
    /// With bwrap: stop when bubblewrap cannot run here (else warn and go on without it).
    pub required: bool,
    /// `kind` was written (either way): the user chose, so a run without bubblewrap does not
    /// warn that its agent is not contained. (Not in the stored form: read at the start.)
    #[serde(skip)]
    pub kind_chosen: bool,
    pub memory_bytes: Option<u64>,
    pub cpu_seconds: Option<u64>,
    pub max_output_bytes: Option<u64>,
    pub max_processes: Option<u64>,
}

impl SandboxSpec {
    /// The limits for the process runner.
    pub fn limits(&self) -> crate::exec::Limits {
        crate::exec::Limits {
            memory_bytes: self.memory_bytes,
            cpu_seconds: self.cpu_seconds,
            file_bytes: self.max_output_bytes,
            processes: self.max_processes,
        }
    }
}

pub(super) fn parse(s: &Section) -> Result<SandboxSpec, SpecError> {
    let bwrap = match s.get::<String>("kind")?.as_deref() {
        None | Some("rlimits") => false,
        Some("bwrap") => true,
        Some(other) => {
            return Err(s.err(
                "kind",
                format!("unknown sandbox kind `{other}` (expected \"rlimits\" or \"bwrap\")"),
            ))
        }
    };
    let network = s.get_or("network", true)?;
    if !bwrap && !network {
        return Err(s.err("network", "cutting the network needs kind = \"bwrap\""));
    }
    Ok(SandboxSpec {
        bwrap,
        network,
        required: s.get_or("required", true)?,
        kind_chosen: s.has("kind"),
        memory_bytes: s.get::<Size>("memory")?.map(|b| b.0),
        cpu_seconds: s
            .get::<std::time::Duration>("cpu_time")?
            .map(|d| d.as_secs().max(1)),
        max_output_bytes: s.get::<Size>("max_output")?.map(|b| b.0),
        max_processes: s.get("max_processes")?,
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{err, parse, GOOD};
    use super::super::units::parse_size;

    #[test]
    fn sandbox_sizes_and_kinds() {
        let s = parse(&format!(
            "{GOOD}\n[sandbox]\nmemory = \"1.5G\"\ncpu_time = \"2m\"\nmax_output = 1024\n"
        ))
        .unwrap();
        assert_eq!(s.sandbox.memory_bytes, Some(3 * 512 * 1024 * 1024));
        assert_eq!(s.sandbox.cpu_seconds, Some(120));
        assert_eq!(s.sandbox.max_output_bytes, Some(1024));
        let e = err(&format!("{GOOD}\n[sandbox]\nmemory = \"lots\"\n"));
        assert_eq!(e.key, "sandbox.memory", "{e}");
        let e = err(&format!("{GOOD}\n[sandbox]\nkind = \"jail\"\n"));
        assert!(
            e.message.contains("expected \"rlimits\" or \"bwrap\""),
            "{e}"
        );
        let e = err(&format!("{GOOD}\n[sandbox]\nnetwork = false\n"));
        assert!(e.message.contains("needs kind = \"bwrap\""), "{e}");
        let s = parse(&format!(
            "{GOOD}\n[sandbox]\nkind = \"bwrap\"\nnetwork = false\n"
        ))
        .unwrap();
        assert!(s.sandbox.bwrap && !s.sandbox.network && s.sandbox.required);
        assert!(s.sandbox.kind_chosen);
        assert!(!parse(GOOD).unwrap().sandbox.kind_chosen);
        assert!(
            parse(&format!("{GOOD}\n[sandbox]\nkind = \"rlimits\"\n"))
                .unwrap()
                .sandbox
                .kind_chosen
        );
        assert_eq!(parse_size("512M"), Ok(512 * 1024 * 1024));
        assert_eq!(parse_size("8GiB"), Ok(8 << 30));
        assert!(parse_size("0").is_err());
    }
}
