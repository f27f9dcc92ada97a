//! Small helpers several modules need in exactly the same form: the HTML escape of the
//! report and the dashboard, UTC times as text, an HTTP answer's status and text, the mean and
//! median of the statistics, the splitmix64 step behind every seeded generator (and the
//! fuzzers' stream of draws built on it), a folder made private. One copy each, so a fix
//! reaches every caller.

/// Escapes text for HTML or SVG element content and for quoted attribute values (either
/// quote): `&`, `<`, `>`, `"` and `'`.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_html_escaped_str(&mut out, s);
    out
}

/// Appends `s` to `out` escaped as [`push_html_escaped`] escapes each character: the runs
/// between the five escaped characters (all ASCII, never inside another's bytes) in one go.
pub fn push_html_escaped_str(out: &mut String, s: &str) {
    let mut start = 0;
    for (i, b) in s.bytes().enumerate() {
        let Some(escaped) = html_entity(char::from(b)) else {
            continue;
        };
        out.push_str(&s[start..i]);
        out.push_str(escaped);
        start = i + 1;
    }
    out.push_str(&s[start..]);
}

/// Appends `x` with `prec` decimals, the very text of `format!("{x:.prec$}")`: by integer
/// arithmetic for `prec` up to 6 and `|x|` under a million, by the formatter near a tie. The
/// product `|x| * 10^prec` is rounded once, and rounding keeps order: a tie `k + 0.5` being a
/// float itself, the product is on the same side of it as the exact value, or on it (then, and
/// near it, the formatter decides). A plot of 10,000 points formats 30,000 numbers; the
/// formatter's exact path was most of its time.
pub fn push_fixed(out: &mut String, x: f64, prec: usize) {
    use std::fmt::Write as _;
    const SCALE: [u64; 7] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000];
    if prec < SCALE.len() && x.is_finite() && x.abs() < 1e6 {
        let scale = SCALE[prec];
        let t = x.abs() * scale as f64;
        if (t - t.floor() - 0.5).abs() > 1e-3 {
            let r = t.round() as u64;
            if x.is_sign_negative() {
                out.push('-');
            }
            let _ = write!(out, "{}", r / scale);
            if prec > 0 {
                let _ = write!(out, ".{:0prec$}", r % scale);
            }
            return;
        }
    }
    let _ = write!(out, "{x:.prec$}");
}

/// A measured value as people read it, appended to `out`: six decimals in the usual range,
/// scientific notation where six decimals would hide it (below 1e-3, as 0.000000) or bury it
/// (from 1e6 on); zero as 0.000000.
pub fn push_value(out: &mut String, v: f64) {
    use std::fmt::Write as _;
    if v == 0.0 || (v.abs() >= 1e-3 && v.abs() < 1e6) {
        push_fixed(out, v, 6);
    } else {
        let _ = write!(out, "{v:.4e}");
    }
}

/// [`push_value`] as a string.
pub fn fmt_value(v: f64) -> String {
    let mut out = String::with_capacity(16);
    push_value(&mut out, v);
    out
}

/// [`fmt_value`] with its sign always written: a difference (`+0.001494`, `-3.0000e-9`).
pub fn fmt_signed(v: f64) -> String {
    let mut out = String::with_capacity(16);
    // -0.0 is zero: `+0.000000`, not `+-0.000000`.
    let v = if v == 0.0 { 0.0 } else { v };
    if v >= 0.0 {
        out.push('+');
    }
    push_value(&mut out, v);
    out
}

/// Writes `bytes` to `path` whole or not at all: to a file beside it, synced, then renamed
/// over it (a kill or a power cut mid-write leaves the last whole version). Makes the folder.
pub fn write_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let mut f = std::fs::File::create(&tmp)?;
    std::io::Write::write_all(&mut f, bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// `s` cut to at most `max` characters at a word's end, with ` ...` where it was cut (a word
/// longer than `max` is cut inside).
pub fn cut_at_word(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let head: String = s.chars().take(max).collect();
    let end = head.trim_end_matches(|c: char| !c.is_whitespace());
    let end = if end.trim().is_empty() {
        head.as_str()
    } else {
        end
    };
    format!("{} ...", end.trim_end().trim_end_matches([',', ';']))
}

/// `s` with its `%XX` escapes decoded (an invalid one left as it is).
pub fn percent_decoded(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            // Two hex digits make one byte: the casts cannot wrap.
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The password in a PostgreSQL URL (`user:password@host` or `?password=`), as written.
pub fn url_password(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let (authority, query) = match rest.split_once('?') {
        Some((a, q)) => (a.split('/').next().unwrap_or(""), q),
        None => (rest.split('/').next().unwrap_or(""), ""),
    };
    let in_authority = authority
        .rsplit_once('@')
        .and_then(|(user, _)| user.split_once(':'))
        .map(|(_, p)| p);
    in_authority.or_else(|| {
        query
            .split('&')
            .find_map(|kv| {
                kv.split_once('=')
                    .filter(|(k, _)| percent_decoded(k).eq_ignore_ascii_case("password"))
            })
            .map(|(_, p)| p)
    })
}

/// Whether `value` (an environment variable's) holds the URL `url` or its password (one of
/// four characters or more): what must not reach code hone runs on a candidate's or an
/// agent's behalf when `url` is the store's.
pub fn reveals_url(value: &str, url: &str) -> bool {
    if url.is_empty() {
        return false;
    }
    value.contains(url) || url_password(url).is_some_and(|p| p.len() >= 4 && value.contains(p))
}

/// The values of hone's secrets (API keys, the store's URL and its password, the queue's key,
/// the webhook's secret), as a run or a worker registers them when it starts ([`withhold`]).
static WITHHELD: std::sync::RwLock<Vec<String>> = std::sync::RwLock::new(Vec::new());

/// Registers `value` as a secret of hone's own: no process hone starts for itself (git, and
/// the ssh it starts in turn) inherits a variable that holds it, since any process of the same
/// user can read a dumpable process's environment. Values under 8 characters are ignored.
pub fn withhold(value: &str) {
    let value = value.trim();
    if value.len() < 8 {
        return;
    }
    let mut w = WITHHELD
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if !w.iter().any(|v| v == value) {
        w.push(value.to_string());
    }
}

/// Whether `value` (an environment variable's) holds a secret registered with [`withhold`].
pub fn is_withheld(value: &str) -> bool {
    WITHHELD
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .iter()
        .any(|s| value.contains(s.as_str()))
}

/// HMAC-SHA256 (RFC 2104) of `message` under `key`: webhook signatures and the remote
/// workers' signed jobs and results. Written over the `sha2` crate hone already uses.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest, Sha256};
    const BLOCK: usize = 64;
    let mut k = [0u8; BLOCK];
    if key.len() > BLOCK {
        k[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        k[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(k.map(|b| b ^ 0x36));
    inner.update(message);
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(k.map(|b| b ^ 0x5c));
    outer.update(inner);
    outer.finalize().into()
}

/// Whether `a` and `b` are the same bytes, in a time that depends on their lengths only (for
/// comparing MACs: every byte is compared whatever came before).
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The Levenshtein distance between `a` and `b`, in characters: how near a typo is.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != cb);
            cur[j + 1] = sub.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// `secs` seconds since the epoch in UTC, written by chrono's `format` (e.g. `%Y%m%d`): run
/// tags, schedule stamps and the dashboard's times.
pub fn utc_text(secs: i64, format: &str) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .unwrap_or_default()
        .format(format)
        .to_string()
}

/// An HTTP answer's status and its body as text, read up to `limit` bytes (an unreadable or
/// larger body reads as empty): what a caller that reports or parses an answer needs of it.
pub fn http_status_and_text(resp: ureq::http::Response<ureq::Body>, limit: u64) -> (u16, String) {
    let status = resp.status().as_u16();
    let text = resp
        .into_body()
        .with_config()
        .limit(limit)
        .read_to_string()
        .unwrap_or_default();
    (status, text)
}

/// Waits `wait`, or less when `cancel` says stop (looked at every 50 ms): `false` then.
pub fn pause(wait: std::time::Duration, cancel: &dyn Fn() -> bool) -> bool {
    let end = std::time::Instant::now() + wait;
    loop {
        if cancel() {
            return false;
        }
        let left = end.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(std::time::Duration::from_millis(50)));
    }
}

/// `s` with a zero-width space after what GitHub would read as a reference: `@name` (a
/// mention, which notifies), `#12`, `owner/repo#12`, `GH-12` and `.../issues/12` or
/// `.../pull/12` (links, and after `Closes` or `Fixes` an issue closed when the change is
/// merged). For agent-written text in a pull request's body and the commits `hone finalize`
/// makes: it reads the same, and acts on nothing.
pub fn github_inert(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 8);
    for (i, &c) in chars.iter().enumerate() {
        out.push(c);
        let next = chars.get(i + 1).copied().unwrap_or(' ');
        let refers = match c {
            '@' => next.is_ascii_alphanumeric(),
            '#' => next.is_ascii_digit(),
            '-' | '/' => {
                // The few characters up to here, lowercased.
                let ends = |word: &str| {
                    let n = word.chars().count();
                    i + 1 >= n
                        && chars[i + 1 - n..=i]
                            .iter()
                            .map(char::to_ascii_lowercase)
                            .eq(word.chars())
                };
                next.is_ascii_digit() && (ends("gh-") || ends("/issues/") || ends("/pull/"))
            }
            _ => false,
        };
        if refers {
            out.push('\u{200b}');
        }
    }
    out
}

/// Appends `c` to `out` as [`html_escape`] writes it: the special characters as entities,
/// any other character as it is.
pub fn push_html_escaped(out: &mut String, c: char) {
    match html_entity(c) {
        Some(entity) => out.push_str(entity),
        None => out.push(c),
    }
}

/// The entity [`html_escape`] writes for `c`, if `c` is one of the five it escapes (all
/// ASCII: a byte of a longer UTF-8 character, read as a `char`, is none of them).
fn html_entity(c: char) -> Option<&'static str> {
    Some(match c {
        '&' => "&amp;",
        '<' => "&lt;",
        '>' => "&gt;",
        '"' => "&quot;",
        '\'' => "&#39;",
        _ => return None,
    })
}

/// The first executable file `name` in the absolute entries of `path` (a `PATH` value),
/// passing over relative and empty entries: hone starts `git` and `bwrap` in worktrees a
/// candidate wrote, where an entry like `bin`, `.` or an empty one (the current directory)
/// would find a `git` or a `bwrap` the candidate put there, and run it as hone.
pub fn absolute_program(path: &std::ffi::OsStr, name: &str) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// [`absolute_program`] in hone's own `PATH`, looked up at each call (a few `stat`s): what
/// hone starts as `name`, never looked up relative to a directory. When no absolute entry has
/// it, a path that does not exist (`/nonexistent/NAME`), so that starting it fails as a
/// program missing from `PATH` does, with the message each caller gives then.
pub fn program_on_path(name: &str) -> std::ffi::OsString {
    let path = std::env::var_os("PATH").unwrap_or_default();
    absolute_program(&path, name)
        .unwrap_or_else(|| std::path::Path::new("/nonexistent").join(name))
        .into_os_string()
}

/// `path` (a `PATH` value) with only its absolute entries, in order: the `PATH` hone gives
/// the programs it starts in a worktree, so that nothing is looked up there. With no absolute
/// entry, `/usr/bin:/bin` (an empty `PATH` would mean the current directory).
pub fn absolute_entries(path: &std::ffi::OsStr) -> std::ffi::OsString {
    let dirs: Vec<std::path::PathBuf> = std::env::split_paths(path)
        .filter(|dir| dir.is_absolute())
        .collect();
    if dirs.is_empty() {
        return "/usr/bin:/bin".into();
    }
    // Absolute entries of a PATH that split_paths parsed contain no separator.
    std::env::join_paths(dirs).unwrap_or_else(|_| "/usr/bin:/bin".into())
}

/// The variables whose relative entries would make a program load or run a file from the
/// directory it starts in: `PATH` (programs), the dynamic loader's `LD_LIBRARY_PATH` (an empty
/// entry, as `$LD_LIBRARY_PATH:/usr/local/cuda/lib64` leaves when it was unset, is the current
/// directory), `LD_PRELOAD` and `LD_AUDIT` (libraries by path).
pub const SEARCH_PATHS: &[&str] = &["PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT"];

/// An inherited variable as hone passes it on to a process that runs in a worktree (git, the
/// agent, the verifier, the holdout, a reviewer, a SLURM job, a worker's verifier): `PATH`
/// with its absolute entries only ([`absolute_entries`]); the loader's variables split as
/// glibc splits them (`LD_LIBRARY_PATH` at `:` and `;`, `LD_PRELOAD` at `:` and spaces,
/// `LD_AUDIT` at `:`) and kept where they cannot name a file in that directory: absolute
/// entries, and for the two lists of libraries also bare names (the loader looks those up in
/// its own paths, never the current directory). Anything else as it is.
pub fn passed_on(
    (name, value): (std::ffi::OsString, std::ffi::OsString),
) -> (std::ffi::OsString, std::ffi::OsString) {
    use std::os::unix::ffi::OsStringExt;
    let Some(which) = SEARCH_PATHS.iter().position(|v| name == *v) else {
        return (name, value);
    };
    if which == 0 {
        let value = absolute_entries(&value);
        return (name, value);
    }
    let kept: Vec<&[u8]> = entries(which, &value)
        .filter(|(_, keep)| *keep)
        .map(|(e, _)| e)
        .collect();
    (name, std::ffi::OsString::from_vec(kept.join(&b':')))
}

/// The entries of `value`, the [`SEARCH_PATHS`] variable at `which`, split as glibc (or the
/// shell, for `PATH`) splits it, each with whether [`passed_on`] keeps it.
fn entries(which: usize, value: &std::ffi::OsStr) -> impl Iterator<Item = (&[u8], bool)> {
    use std::os::unix::ffi::OsStrExt;
    let separators: &'static [u8] = match which {
        1 => b":;",
        2 => b": ",
        _ => b":",
    };
    value
        .as_bytes()
        .split(move |b| separators.contains(b))
        .map(move |e| {
            let keep = match e.first() {
                Some(b'/') => true,
                Some(_) => which > 1 && !e.contains(&b'/'),
                None => false,
            };
            (e, keep)
        })
}

/// Does `value` of the variable `name` have an entry that would find a file in the current
/// directory (what [`passed_on`] leaves out)? Not for entries the loader ignores: an empty
/// `LD_LIBRARY_PATH`, an empty entry of `LD_PRELOAD` or `LD_AUDIT`.
pub fn has_relative_entries(name: &str, value: &std::ffi::OsStr) -> bool {
    let Some(which) = SEARCH_PATHS.iter().position(|v| name == *v) else {
        return false;
    };
    if which == 1 && value.is_empty() {
        return false;
    }
    entries(which, value).any(|(e, keep)| !(keep || which > 1 && e.is_empty()))
}

/// The variables of `vars` among [`SEARCH_PATHS`], as [`passed_on`] passes them on: what a
/// program hone starts itself in a worktree (git) is given over its inherited values.
pub fn search_paths_of(
    vars: impl Iterator<Item = (std::ffi::OsString, std::ffi::OsString)>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    vars.filter(|(k, _)| SEARCH_PATHS.iter().any(|v| k == v))
        .map(passed_on)
        .collect()
}

/// Makes the folder `dir` readable and passable by its owner alone (mode 0700), where this
/// process owns it; otherwise, or where the file system refuses, leaves it as it is.
pub fn owner_only(dir: &std::path::Path) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Ok(meta) = std::fs::symlink_metadata(dir) else {
        return;
    };
    // SAFETY: geteuid takes nothing and cannot fail.
    let me = unsafe { libc::geteuid() };
    if meta.is_dir() && meta.uid() == me && meta.mode() & 0o077 != 0 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
}

/// The last line with something on it of the file at `path`, trimmed, read from its last
/// 4 KiB (a `\r` ends a line: a progress bar rewrites its line in place); `None` when the
/// file is unreadable or holds none. hone's own notes in an agent's log (`--- hone: ... ---`) are
/// not its lines.
pub fn last_line_of(path: &std::path::Path) -> Option<String> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    f.seek(SeekFrom::Start(len.saturating_sub(4096))).ok()?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    text.rsplit(['\n', '\r'])
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("--- hone: "))
        .map(str::to_string)
}

/// The last `n` lines of a log, where a `\r` ends a line as a newline does: a progress bar
/// that rewrites one line in place (`\rstep 00042 ...`) is one line an update, not one
/// line of megabytes.
pub fn last_lines(text: &str, n: usize) -> Vec<&str> {
    let mut out: Vec<&str> = text
        .rsplit(['\n', '\r'])
        .filter(|l| !l.is_empty())
        .take(n)
        .collect();
    out.reverse();
    out
}

/// The first `n` characters of `s`, and `…` after them when `s` has more: what a table cell,
/// a plot's title or a message shows of a long text. A caller that must stay within `n`
/// characters in all cuts to `n - 1` when `s` has more than `n`.
pub fn cut_chars(s: &str, n: usize) -> String {
    let mut out: String = s.chars().take(n).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// The arithmetic mean; `NaN` for an empty slice.
pub fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// The median (the mean of the two middle values for an even count), ordering by
/// `f64::total_cmp`. `NaN` for an empty slice, like a mean of nothing: a report shows it as
/// "no data", and callers that need a number check for values first.
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

/// One step of splitmix64: advances `state` and returns the next output. Small, fast and
/// good enough for sampling; the seeded generators built on it (`meta::Rng`, the knobs
/// sampler's) differ only in how they derive the starting state.
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A seeded stream of draws for the fuzzers (the spec's and the CLI's): splitmix64 steps from
/// the seed, so a failing case is reproduced from its seed alone. Public for the CLI's fuzz
/// tests, not an API.
#[doc(hidden)]
pub struct Draw(pub u64);

impl Draw {
    /// The next raw 64-bit output.
    pub fn next_u64(&mut self) -> u64 {
        splitmix64(&mut self.0)
    }

    /// A draw in `0..n` (0 for `n == 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// One of `items`, which must not be empty.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

/// A uniform draw in [0, 1) from a 64-bit output (its top 53 bits).
pub fn unit_f64(x: u64) -> f64 {
    (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Pins a seeded generator's streams: `draw(seed, stream)` gives its first three outputs,
/// checked against `want` for the seeds `(0, 0)`, `(7, the sampler's design stream)` and
/// `(42, 3)`.
#[cfg(test)]
pub(crate) fn assert_pinned_streams(draw: impl Fn(u64, u64) -> [u64; 3], want: [[u64; 3]; 3]) {
    let seeds = [(0, 0), (7, 0x4c48_535f_4445_5349), (42, 3)];
    for ((seed, stream), want) in seeds.into_iter().zip(want) {
        assert_eq!(draw(seed, stream), want, "seed {seed}, stream {stream:#x}");
    }
}

/// Test helpers: an environment from string pairs, and one as strings to compare.
#[cfg(test)]
pub(crate) fn env_of(pairs: &[(&str, &str)]) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect()
}

#[cfg(test)]
pub(crate) fn env_strings(
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Vec<(String, String)> {
    env.iter()
        .map(|(k, v)| (k.to_string_lossy().into(), v.to_string_lossy().into()))
        .collect()
}

#[cfg(test)]
#[path = "util_tests.rs"]
mod tests;
