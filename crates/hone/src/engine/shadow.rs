//! A candidate's new Python module named like one of the standard library's (`json.py`,
//! `random/`), or like a module the scorer imports (`numpy.py`), where a sealed scorer
//! imports from: `python3 -m eval.score` puts the worktree's
//! top first on `sys.path`, `python3 evaluate.py` its own directory, so the scorer's `import
//! json` (or that of any library it loads) would run the candidate's code, which can then
//! print any score. Such a module is a `violation`, when the run has a sealed stage.

/// The standard library's top-level modules (Python's `sys.stdlib_module_names`, 3.11), the
/// private ones included (`__future__`, `_strptime`, `_compat_pickle` are imported by
/// `from __future__ import`, `datetime.strptime`, `pickle`).
const STDLIB: &[&str] = &[
    "__future__",
    "_abc",
    "_aix_support",
    "_ast",
    "_asyncio",
    "_bisect",
    "_blake2",
    "_bootsubprocess",
    "_bz2",
    "_codecs",
    "_codecs_cn",
    "_codecs_hk",
    "_codecs_iso2022",
    "_codecs_jp",
    "_codecs_kr",
    "_codecs_tw",
    "_collections",
    "_collections_abc",
    "_compat_pickle",
    "_compression",
    "_contextvars",
    "_crypt",
    "_csv",
    "_ctypes",
    "_curses",
    "_curses_panel",
    "_datetime",
    "_dbm",
    "_decimal",
    "_elementtree",
    "_frozen_importlib",
    "_frozen_importlib_external",
    "_functools",
    "_gdbm",
    "_hashlib",
    "_heapq",
    "_imp",
    "_io",
    "_json",
    "_locale",
    "_lsprof",
    "_lzma",
    "_markupbase",
    "_md5",
    "_msi",
    "_multibytecodec",
    "_multiprocessing",
    "_opcode",
    "_operator",
    "_osx_support",
    "_overlapped",
    "_pickle",
    "_posixshmem",
    "_posixsubprocess",
    "_py_abc",
    "_pydecimal",
    "_pyio",
    "_queue",
    "_random",
    "_scproxy",
    "_sha1",
    "_sha256",
    "_sha3",
    "_sha512",
    "_signal",
    "_sitebuiltins",
    "_socket",
    "_sqlite3",
    "_sre",
    "_ssl",
    "_stat",
    "_statistics",
    "_string",
    "_strptime",
    "_struct",
    "_symtable",
    "_thread",
    "_threading_local",
    "_tkinter",
    "_tokenize",
    "_tracemalloc",
    "_typing",
    "_uuid",
    "_warnings",
    "_weakref",
    "_weakrefset",
    "_winapi",
    "_zoneinfo",
    "abc",
    "aifc",
    "antigravity",
    "argparse",
    "array",
    "ast",
    "asynchat",
    "asyncio",
    "asyncore",
    "atexit",
    "audioop",
    "base64",
    "bdb",
    "binascii",
    "bisect",
    "builtins",
    "bz2",
    "cProfile",
    "calendar",
    "cgi",
    "cgitb",
    "chunk",
    "cmath",
    "cmd",
    "code",
    "codecs",
    "codeop",
    "collections",
    "colorsys",
    "compileall",
    "concurrent",
    "configparser",
    "contextlib",
    "contextvars",
    "copy",
    "copyreg",
    "crypt",
    "csv",
    "ctypes",
    "curses",
    "dataclasses",
    "datetime",
    "dbm",
    "decimal",
    "difflib",
    "dis",
    "distutils",
    "doctest",
    "email",
    "encodings",
    "ensurepip",
    "enum",
    "errno",
    "faulthandler",
    "fcntl",
    "filecmp",
    "fileinput",
    "fnmatch",
    "fractions",
    "ftplib",
    "functools",
    "gc",
    "genericpath",
    "getopt",
    "getpass",
    "gettext",
    "glob",
    "graphlib",
    "grp",
    "gzip",
    "hashlib",
    "heapq",
    "hmac",
    "html",
    "http",
    "idlelib",
    "imaplib",
    "imghdr",
    "imp",
    "importlib",
    "inspect",
    "io",
    "ipaddress",
    "itertools",
    "json",
    "keyword",
    "lib2to3",
    "linecache",
    "locale",
    "logging",
    "lzma",
    "mailbox",
    "mailcap",
    "marshal",
    "math",
    "mimetypes",
    "mmap",
    "modulefinder",
    "msilib",
    "msvcrt",
    "multiprocessing",
    "netrc",
    "nis",
    "nntplib",
    "nt",
    "ntpath",
    "nturl2path",
    "numbers",
    "opcode",
    "operator",
    "optparse",
    "os",
    "ossaudiodev",
    "pathlib",
    "pdb",
    "pickle",
    "pickletools",
    "pipes",
    "pkgutil",
    "platform",
    "plistlib",
    "poplib",
    "posix",
    "posixpath",
    "pprint",
    "profile",
    "pstats",
    "pty",
    "pwd",
    "py_compile",
    "pyclbr",
    "pydoc",
    "pydoc_data",
    "pyexpat",
    "queue",
    "quopri",
    "random",
    "re",
    "readline",
    "reprlib",
    "resource",
    "rlcompleter",
    "runpy",
    "sched",
    "secrets",
    "select",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "signal",
    "site",
    "smtpd",
    "smtplib",
    "sndhdr",
    "socket",
    "socketserver",
    "spwd",
    "sqlite3",
    "sre_compile",
    "sre_constants",
    "sre_parse",
    "ssl",
    "stat",
    "statistics",
    "string",
    "stringprep",
    "struct",
    "subprocess",
    "sunau",
    "symtable",
    "sys",
    "sysconfig",
    "syslog",
    "tabnanny",
    "tarfile",
    "telnetlib",
    "tempfile",
    "termios",
    "textwrap",
    "this",
    "threading",
    "time",
    "timeit",
    "tkinter",
    "token",
    "tokenize",
    "tomllib",
    "trace",
    "traceback",
    "tracemalloc",
    "tty",
    "turtle",
    "turtledemo",
    "types",
    "typing",
    "unicodedata",
    "unittest",
    "urllib",
    "uu",
    "uuid",
    "venv",
    "warnings",
    "wave",
    "weakref",
    "webbrowser",
    "winreg",
    "winsound",
    "wsgiref",
    "xdrlib",
    "xml",
    "xmlrpc",
    "zipapp",
    "zipfile",
    "zipimport",
    "zlib",
    "zoneinfo",
];

/// The module of the standard library's, or of those the scorer imports (`imported`:
/// `numpy`, `sklearn`), that `path` (a file the candidate added) would stand for where a
/// sealed scorer looks first: a module in one of `dirs` (`""`: the top) as Python finds one
/// (`json.py`, a sourceless `json.pyc`, an extension `json.so` or `json.cpython-311-x86_64-
/// linux-gnu.so`), or a package's `__init__` of any of those kinds.
pub(super) fn shadowed(path: &str, dirs: &[String], imported: &[String]) -> Option<String> {
    let (dir, file) = path.rsplit_once('/').unwrap_or(("", path));
    let stem = module_stem(file)?;
    let (dir, module) = match stem {
        "__init__" => dir.rsplit_once('/').unwrap_or(("", dir)),
        stem => (dir, stem),
    };
    if !dirs.iter().any(|d| d == dir) {
        return None;
    }
    STDLIB
        .iter()
        .chain(LATER)
        .find(|n| **n == module)
        .map(|n| format!("Python's `{n}`"))
        .or_else(|| {
            imported
                .iter()
                .any(|n| n == module)
                .then(|| format!("the `{module}` it imports"))
        })
        // Later versions add private modules (3.12's `_sha2`, which `random` imports; 3.13's
        // `_colorize`, which `logging` does): any new private name is taken for one.
        .or_else(|| {
            module
                .starts_with('_')
                .then(|| format!("a private module `{module}` of Python's, should there be one"))
        })
}

/// The sealed scorers as the gate checks a candidate's new modules against them: where they
/// look for modules first, and the top-level modules they import (`numpy`).
#[derive(Debug, Default)]
pub(super) struct Scorers {
    pub dirs: Vec<String>,
    pub modules: Vec<String>,
}

/// Where the sealed stages' `commands` (and the lines of the shell scripts they run) look for
/// modules first: the directory of each script a command names (after a `cd DIR`, within it:
/// `cd eval && python3 score.py` runs `eval/score.py`, and `-m` there looks in `eval/`), the
/// directories a `PYTHONPATH=` names (one made of a variable or a command's output, such as
/// `$PWD`, is taken for the top), and the top for `-m` (`-um` too), `-c` (or where no script
/// is named, to be safe). Words are split at shell operators too (`python3 score.py|tail`).
pub(super) fn scorer_dirs(commands: &[&str]) -> Vec<String> {
    let mut dirs: Vec<String> = Vec::new();
    let mut top = false;
    // `-m`, `-c`, or flags ending in either (`-um`).
    let runs_code = |w: &&str| {
        w.len() > 1
            && w.starts_with('-')
            && !w.starts_with("--")
            && (w.ends_with('m') || w.ends_with('c'))
            && w[1..].chars().all(|c| c.is_ascii_alphabetic())
    };
    for command in commands {
        let words: Vec<&str> = command
            .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
            .map(|w| w.trim_matches(|c| c == '"' || c == '\''))
            .filter(|w| !w.is_empty())
            .collect();
        top |= words.iter().any(runs_code) || !words.iter().any(|w| w.contains(".py"));
        let mut cd = String::new();
        for (i, word) in words.iter().enumerate() {
            if let Some(path) = word.strip_prefix("PYTHONPATH=") {
                for entry in path.split(':') {
                    let entry = entry.trim_matches(|c| c == '"' || c == '\'');
                    if entry.contains('$') || entry.contains('`') {
                        top = true;
                    } else if let Some(dir) = relative(&cd, entry) {
                        dirs.push(dir);
                    }
                }
                continue;
            }
            if i > 0 && matches!(words[i - 1], "cd" | "pushd") {
                // From where the command stands; out of the worktree (or absolute), the top,
                // to be safe.
                match relative(&cd, word) {
                    Some(dir) => {
                        cd = dir.clone();
                        dirs.push(dir);
                    }
                    None => {
                        cd.clear();
                        top = true;
                    }
                }
            }
            if word.ends_with(".py") {
                if let Some(script) = relative(&cd, word) {
                    dirs.push(script.rsplit_once('/').map_or("", |(d, _)| d).to_string());
                }
            }
        }
    }
    if top {
        dirs.push(String::new());
    }
    dirs.sort();
    dirs.dedup();
    dirs
}

/// `path` (relative, from directory `from` of the worktree) as a path from the worktree's
/// top, `.` and `..` resolved (`""`: the top); `None` for an absolute path or one that leaves
/// the worktree.
pub(super) fn relative(from: &str, path: &str) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let mut parts: Vec<&str> = from.split('/').filter(|p| !p.is_empty()).collect();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            p => parts.push(p),
        }
    }
    Some(parts.join("/"))
}

/// Top-level modules Python added after 3.11 (the list above), as far as they are known:
/// 3.12's, 3.13's and 3.14's.
const LATER: &[&str] = &[
    "_pydatetime",
    "_pylong",
    "_sha2",
    "_colorize",
    "_opcode_metadata",
    "_pyrepl",
    "_interpreters",
    "_interpqueues",
    "_interpchannels",
    "_suggestions",
    "_sysconfig",
    "_android_support",
    "_apple_support",
    "_ios_support",
    "annotationlib",
    "compression",
    "_zstd",
    "_hmac",
    "_remote_debugging",
];

/// The module a file name is for, if Python imports it as one: `name.py`, `name.pyc`,
/// `name.so`, `name.<tag>.so` (`.pyd` too).
fn module_stem(file: &str) -> Option<&str> {
    if let Some(stem) = file
        .strip_suffix(".py")
        .or_else(|| file.strip_suffix(".pyc"))
    {
        return Some(stem);
    }
    let stem = file
        .strip_suffix(".so")
        .or_else(|| file.strip_suffix(".pyd"))?;
    // `json.cpython-311-x86_64-linux-gnu.so`, `json.abi3.so`: the name before the tag.
    Some(stem.split('.').next().unwrap_or(stem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_a_sealed_scorer_looks_first() {
        let cases: &[(&[&str], &[&str])] = &[
            (&["python3 evaluate.py"], &[""]),
            (&["python3 ./eval/score.py --x 1"], &["eval"]),
            (&["python3 -m eval.score"], &[""]),
            (&["cd eval && python3 score.py"], &["eval"]),
            (&["cd eval/ && python3 sub/score.py"], &["eval", "eval/sub"]),
            (&["cd eval && python3 -m score"], &["", "eval"]),
            (&["(cd eval; python3 score.py)"], &["eval"]),
            (
                &["cd eval && python3 a.py; cd .. && python3 b.py"],
                &["", "eval"],
            ),
            (
                &["cd eval && cd sub && python3 s.py"],
                &["eval", "eval/sub"],
            ),
            (&["cd /opt/x && python3 s.py"], &[""]),
            // Glued to an operator, the script is still read.
            (&["python3 eval/score.py|tail -n 1"], &["eval"]),
            (&["python3 eval/score.py;"], &["eval"]),
            // PYTHONPATH's directories come first too, read from where the command stands;
            // one made of a variable is taken for the top.
            (
                &["PYTHONPATH=.:lib python3 eval/score.py"],
                &["", "eval", "lib"],
            ),
            (
                &["env PYTHONPATH=./src python3 eval/score.py"],
                &["eval", "src"],
            ),
            (&["PYTHONPATH=\".\" python3 eval/score.py"], &["", "eval"]),
            (&["PYTHONPATH=$PWD python3 eval/score.py"], &["", "eval"]),
            (
                &["cd eval && PYTHONPATH=.. python3 score.py"],
                &["", "eval"],
            ),
            // Flags glued to `-m`, and code given with `-c`: the top.
            (&["python3 -um eval.score"], &[""]),
            (
                &["python3 -c \"import runpy; runpy.run_path('eval/score.py')\""],
                &["", "eval"],
            ),
            // No script named: the top, to be safe; the holdout's command adds its own.
            (&["./score.sh", "python3 holdout/h.py"], &["", "holdout"]),
        ];
        for (commands, want) in cases {
            assert_eq!(scorer_dirs(commands), *want, "{commands:?}");
        }
    }

    #[test]
    fn a_new_module_named_like_the_standard_librarys_where_the_scorer_looks() {
        let dirs = vec![String::new(), "eval".to_string()];
        // Each file, and the module it stands for (`None`: no module of Python's).
        let cases = [
            ("json.py", Some("json")),
            ("random/__init__.py", Some("random")),
            ("eval/math.py", Some("math")),
            // Not where the scorer looks; no module; no module file.
            ("src/json.py", None),
            ("model.py", None),
            ("json.txt", None),
            // A second review's: a private module, and the other kinds of module file.
            ("__future__.py", Some("__future__")),
            ("_strptime.py", Some("_strptime")),
            ("json.pyc", Some("json")),
            ("json.cpython-311-x86_64-linux-gnu.so", Some("json")),
            ("pickle.abi3.so", Some("pickle")),
            ("random/__init__.pyc", Some("random")),
            // A third's: what later versions added.
            ("_sha2.py", Some("_sha2")),
            ("compression/__init__.py", Some("compression")),
        ];
        for (path, module) in cases {
            let want = module.map(|m| format!("Python's `{m}`"));
            assert_eq!(shadowed(path, &dirs, &[]), want, "{path}");
        }
        // Any other private name: perhaps a later version's.
        assert!(shadowed("_newer_private.py", &dirs, &[])
            .is_some_and(|s| s.contains("a private module")));
        // A module the scorer imports, from outside the standard library: there too.
        let imported = ["numpy".to_string(), "sklearn".to_string()];
        for (path, want) in [
            ("numpy.py", Some("the `numpy` it imports")),
            ("eval/sklearn/__init__.py", Some("the `sklearn` it imports")),
            ("src/numpy.py", None),
            ("pandas.py", None),
        ] {
            assert_eq!(shadowed(path, &dirs, &imported).as_deref(), want, "{path}");
        }
    }
}
