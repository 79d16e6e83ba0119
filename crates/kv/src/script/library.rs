//! Function libraries (FUNCTION LOAD, FCALL): their `#!lua name=…` line, the flags a
//! function or a script declares, and the server's set of libraries.
//!
//! A library is Lua code whose first line names it; run once, it registers functions by
//! name (`redis.register_function`), which FCALL then calls with its keys and arguments.
//! Function names are unique across libraries regardless of case, as in Redis, whose FCALL
//! finds `MyFunc` by `myfunc`.
//!
//! The set is shared by the event loops and changed as a whole: FUNCTION LOAD, DELETE,
//! FLUSH and RESTORE compute the set they leave ([`merged`], [`without`]), store the change
//! durably (`keyspace::libraries`), then install it ([`Libraries::install`]), which bumps
//! [`Libraries::version`]. Each loop's Lua state holds the functions of one version and
//! loads the libraries again when it finds the version changed (`Vm`), so a function
//! loaded on one connection is callable on all of them. Inside MULTI the changes are
//! made on the block's view of the set ([`BlockLibraries`]), installed once it has run.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};
use tailstore_resp::split_words;

/// What a function (`flags={…}`) or a script (`#!lua flags=…`) declares about itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags(u8);

/// The flags' names, in the order Redis lists them.
const FLAG_NAMES: [&str; 5] = [
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

impl Flags {
    /// The flag named `name`, if it is one.
    pub fn named(name: &[u8]) -> Option<Flags> {
        let at = FLAG_NAMES.iter().position(|n| n.as_bytes() == name)?;
        Some(Flags(1 << at))
    }

    pub fn with(self, other: Flags) -> Flags {
        Flags(self.0 | other.0)
    }

    /// `no-writes`: write commands are refused, and FCALL_RO (EVAL_RO) may run it. The
    /// other flags concern memory limits, replicas and clusters, which tailstore does not
    /// have; they are kept and listed.
    pub fn no_writes(self) -> bool {
        self.0 & 1 != 0
    }

    pub fn names(self) -> impl Iterator<Item = &'static str> {
        FLAG_NAMES
            .into_iter()
            .enumerate()
            .filter(move |(at, _)| self.0 & (1 << at) != 0)
            .map(|(_, name)| name)
    }
}

/// One function a library registered.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSpec {
    pub name: String,
    pub description: Option<Vec<u8>>,
    pub flags: Flags,
}

/// A library: its name, its code (the `#!lua` line included, as FUNCTION LIST WITHCODE and
/// FUNCTION DUMP give it back) and the functions its code registered.
#[derive(Debug, PartialEq)]
pub struct Library {
    pub name: String,
    pub code: Arc<[u8]>,
    /// Where the Lua code starts, after the `#!lua` line (see [`Header::code_start`]).
    pub code_start: usize,
    pub functions: Vec<FunctionSpec>,
}

impl Library {
    /// The library with its functions in name order: the order FUNCTION LIST gives them in
    /// (Redis lists them in its hash table's order).
    pub fn in_name_order(mut self) -> Library {
        self.functions.sort_by(|a, b| a.name.cmp(&b.name));
        self
    }
}

/// The libraries by name.
pub type LibrarySet = BTreeMap<String, Arc<Library>>;

/// What a library's first line says, and where its Lua code starts.
#[derive(Debug, PartialEq, Eq)]
pub struct Header {
    pub name: String,
    /// The byte at which the code after the `#!` line starts: at that line's newline, so
    /// that the code's line numbers are the library's (Redis reports `user_function:2` for
    /// the line after the `#!` line).
    pub code_start: usize,
}

/// Reads a library's `#!lua name=NAME` line; Redis's error text when it is not one.
pub fn library_header(code: &[u8]) -> Result<Header, String> {
    let (words, code_start) = match shebang_words(code) {
        Shebang::Absent => return Err("Missing library metadata".into()),
        Shebang::Invalid => return Err("Invalid library metadata".into()),
        Shebang::Words(words, end) => (words, end),
    };
    let mut name = None;
    for part in &words[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(String::from_utf8_lossy(&part[5..]).into_owned());
            continue;
        }
        return Err(format!(
            "Invalid metadata value given: {}",
            String::from_utf8_lossy(part)
        ));
    }
    let name = name.ok_or("Library name was not given")?;
    let engine = &words[0][2..];
    if !engine.eq_ignore_ascii_case(b"lua") {
        return Err(format!(
            "Engine '{}' not found",
            String::from_utf8_lossy(engine)
        ));
    }
    check_name(&name)?;
    Ok(Header { name, code_start })
}

/// A library's or function's name: letters, digits and underscores, at least one. Redis
/// 7.0 says "Library names" for function names too, and so do we.
pub fn check_name(name: &str) -> Result<(), String> {
    let fits = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if name.is_empty() || !name.chars().all(fits) {
        return Err("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long".into());
    }
    Ok(())
}

/// A script's `#!lua flags=…` line (Redis 7's EVAL shebang): its flags and where its code
/// starts, or `None` for a script without one; Redis's error text when it is not valid.
pub fn script_header(body: &[u8]) -> Result<Option<(Flags, usize)>, String> {
    let (words, code_start) = match shebang_words(body) {
        Shebang::Absent => return Ok(None),
        Shebang::Invalid => return Err("Invalid script shebang".into()),
        Shebang::Words(words, end) => (words, end),
    };
    if words[0] != b"#!lua" {
        return Err(format!(
            "Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(&words[0])
        ));
    }
    let mut flags = Flags::default();
    for part in &words[1..] {
        let Some(names) = part.strip_prefix(b"flags=") else {
            return Err(format!(
                "Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            ));
        };
        for name in names.split(|&b| b == b',').filter(|n| !n.is_empty()) {
            flags = flags.with(Flags::named(name).ok_or_else(|| {
                format!(
                    "Unexpected flag in script shebang: {}",
                    String::from_utf8_lossy(name)
                )
            })?);
        }
    }
    Ok(Some((flags, code_start)))
}

enum Shebang {
    Absent,
    Invalid,
    /// The line's words (the first starts with `#!`) and the offset of its newline.
    Words(Vec<Vec<u8>>, usize),
}

/// The words of a first line starting with `#!`, split as Redis splits them (its inline
/// commands' rules).
fn shebang_words(code: &[u8]) -> Shebang {
    if !code.starts_with(b"#!") {
        return Shebang::Absent;
    }
    let Some(end) = code.iter().position(|&b| b == b'\n') else {
        return Shebang::Invalid;
    };
    match split_words(&code[..end]) {
        Ok(words) if words.first().is_some_and(|w| w.starts_with(b"#!")) => {
            Shebang::Words(words, end)
        }
        _ => Shebang::Invalid,
    }
}

/// How FUNCTION RESTORE (and LOAD) treats libraries already there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// A library of the same name is an error (LOAD without REPLACE; RESTORE's default).
    Append,
    /// A library of the same name is replaced.
    Replace,
    /// Every library is removed first.
    Flush,
}

/// The server's libraries and the version of that set.
#[derive(Default)]
pub struct Libraries {
    set: Mutex<Installed>,
    /// Held by a change from its check to its install, across its transaction, so that two
    /// changes never both pass their checks against the same set.
    changing: Mutex<()>,
    version: AtomicU64,
    /// The functions running now, on any loop (FUNCTION STATS), by a number of their own.
    running: Mutex<Vec<(u64, RunningFunction)>>,
    next_run: AtomicU64,
}

/// A function running now: its name, the command that called it, and since when.
#[derive(Clone)]
pub struct RunningFunction {
    pub name: String,
    pub command: Vec<Vec<u8>>,
    pub started: std::time::Instant,
}

/// Keeps a function listed as running until dropped.
pub struct Running<'a> {
    libraries: &'a Libraries,
    id: u64,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.libraries
            .running
            .lock()
            .retain(|(id, _)| *id != self.id);
    }
}

#[derive(Default)]
struct Installed {
    libraries: LibrarySet,
    /// Each function's library, by the function's name in lowercase.
    functions: HashMap<String, (Arc<Library>, usize)>,
}

impl Libraries {
    /// Counts the changes installed: a loop whose functions are of another version loads
    /// the libraries again.
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Lists `function` as running until the guard is dropped.
    pub fn started(&self, function: RunningFunction) -> Running<'_> {
        let id = self.next_run.fetch_add(1, Ordering::Relaxed);
        self.running.lock().push((id, function));
        Running {
            libraries: self,
            id,
        }
    }

    /// The function that has run longest of those running now.
    pub fn longest_running(&self) -> Option<RunningFunction> {
        let running = self.running.lock();
        running.first().map(|(_, function)| function.clone())
    }

    /// How many libraries there are, and how many functions they registered.
    pub fn counts(&self) -> (usize, usize) {
        counts(&self.set.lock().libraries)
    }

    /// The libraries now, and their version.
    pub fn all(&self) -> (LibrarySet, u64) {
        let set = self.set.lock();
        (set.libraries.clone(), self.version())
    }

    /// The function FCALL names (in any case): its library and its place there.
    pub fn function(&self, name: &[u8]) -> Option<(Arc<Library>, usize)> {
        let name = std::str::from_utf8(name).ok()?.to_ascii_lowercase();
        self.set.lock().functions.get(&name).cloned()
    }

    /// Begins a change: the set cannot change under it until the guard is dropped.
    pub fn begin_change(&self) -> MutexGuard<'_, ()> {
        self.changing.lock()
    }

    /// Makes `libraries` the set (after its change was stored).
    pub fn install(&self, libraries: LibrarySet) {
        let functions = function_index(&libraries).unwrap_or_default();
        let mut set = self.set.lock();
        *set = Installed {
            libraries,
            functions,
        };
        self.version.fetch_add(1, Ordering::AcqRel);
    }
}

/// The set `incoming` leaves in `base` under `policy`, or Redis's error text when it
/// collides.
pub fn merged(
    base: &LibrarySet,
    incoming: Vec<Library>,
    policy: Policy,
) -> Result<LibrarySet, String> {
    let mut libraries = match policy {
        Policy::Flush => LibrarySet::new(),
        _ => base.clone(),
    };
    for library in incoming {
        if policy == Policy::Append && libraries.contains_key(&library.name) {
            return Err(format!("Library '{}' already exists", library.name));
        }
        libraries.insert(library.name.clone(), Arc::new(library));
    }
    function_index(&libraries)?;
    Ok(libraries)
}

/// How many libraries `set` holds, and how many functions they registered.
pub fn counts(set: &LibrarySet) -> (usize, usize) {
    let functions = set.values().map(|library| library.functions.len()).sum();
    (set.len(), functions)
}

/// `base` without the library `name`; `None` if there is no such library.
pub fn without(base: &LibrarySet, name: &str) -> Option<LibrarySet> {
    let mut libraries = base.clone();
    libraries.remove(name).map(|_| libraries)
}

/// The function FCALL names (in any case) in `set`: its library and its place there. A
/// walk over every function: only a block that changed the libraries looks here, the
/// installed set is indexed ([`Libraries::function`]).
pub fn function_in(set: &LibrarySet, name: &[u8]) -> Option<(Arc<Library>, usize)> {
    set.values().find_map(|library| {
        let at = library
            .functions
            .iter()
            .position(|f| f.name.as_bytes().eq_ignore_ascii_case(name))?;
        Some((library.clone(), at))
    })
}

/// Where FCALL finds its function: the installed libraries, or the set an EXEC block's
/// FUNCTION changes left before it ([`BlockLibraries`]).
#[derive(Clone, Copy)]
pub enum LibrarySource<'a> {
    Installed(&'a Libraries),
    Block(&'a LibrarySet),
}

/// An EXEC block's view of the libraries. Redis runs a block's FUNCTION LOAD (DELETE, FLUSH,
/// RESTORE) in its place, so the FCALLs after it in the block call what it loaded. The
/// block's changes are checked and its functions found before the block runs, in its
/// order, against this view: the installed set as the block's changes so far leave it.
/// Their rows are written in the block's transaction (`server/functions.rs`), and the set
/// the last change left is installed by [`BlockLibraries::apply`] only if the block ran.
/// From its first change on, the view holds the server's change guard until it is
/// applied or dropped, so that no other change passes its checks against a set that the
/// block is about to replace.
pub struct BlockLibraries<'a> {
    server: &'a Libraries,
    changed: Option<Arc<LibrarySet>>,
    guard: Option<MutexGuard<'a, ()>>,
}

impl<'a> BlockLibraries<'a> {
    pub fn new(server: &'a Libraries) -> BlockLibraries<'a> {
        BlockLibraries {
            server,
            changed: None,
            guard: None,
        }
    }

    /// The set a change in the block starts from (the guard taken first).
    pub fn begin_change(&mut self) -> LibrarySet {
        if self.guard.is_none() {
            self.guard = Some(self.server.begin_change());
        }
        self.current()
    }

    /// The set as the block's changes so far leave it.
    pub fn current(&self) -> LibrarySet {
        match &self.changed {
            Some(set) => LibrarySet::clone(set),
            None => self.server.all().0,
        }
    }

    /// A change in the block leaves `set`.
    pub fn changed_to(&mut self, set: LibrarySet) {
        assert!(self.guard.is_some(), "a block's change holds the guard");
        self.changed = Some(Arc::new(set));
    }

    /// The set the block's changes so far left, if it changed the libraries.
    pub fn changed(&self) -> Option<Arc<LibrarySet>> {
        self.changed.clone()
    }

    /// How many libraries and functions the block's changes so far leave.
    pub fn counts(&self) -> (usize, usize) {
        match &self.changed {
            Some(set) => counts(set),
            None => self.server.counts(),
        }
    }

    /// The function FCALL `name`s, as the block's changes so far leave the libraries.
    pub fn function(&self, name: &[u8]) -> Option<(Arc<Library>, usize)> {
        match &self.changed {
            Some(set) => function_in(set, name),
            None => self.server.function(name),
        }
    }

    /// The block ran and its transaction committed: the set its changes left is installed.
    pub fn apply(self) {
        if let Some(set) = self.changed {
            self.server.install(LibrarySet::clone(&set));
        }
    }
}

/// Each function's library by the function's name in lowercase; Redis's error if two
/// libraries register one name.
fn function_index(
    libraries: &LibrarySet,
) -> Result<HashMap<String, (Arc<Library>, usize)>, String> {
    let mut index = HashMap::new();
    for library in libraries.values() {
        for (at, function) in library.functions.iter().enumerate() {
            let key = function.name.to_ascii_lowercase();
            if index.insert(key, (library.clone(), at)).is_some() {
                return Err(format!("Function {} already exists", function.name));
            }
        }
    }
    Ok(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_lines_are_read_as_redis_reads_them() {
        let header = |code: &str| library_header(code.as_bytes());
        assert_eq!(
            header("#!lua name=mylib\nreturn 1"),
            Ok(Header {
                name: "mylib".into(),
                code_start: 16
            })
        );
        assert_eq!(
            header("#!LUA  NAME=\"a_b\"\n").map(|h| h.name),
            Ok("a_b".into())
        );
        assert_eq!(header("return 1"), Err("Missing library metadata".into()));
        assert_eq!(
            header("#!lua name=x"),
            Err("Invalid library metadata".into())
        );
        assert_eq!(
            header("#!lua \"x\n"),
            Err("Invalid library metadata".into())
        );
        assert_eq!(header("#!lua\n"), Err("Library name was not given".into()));
        assert_eq!(
            header("#!lua name=a name=b\n"),
            Err("Invalid metadata value, name argument was given multiple times".into())
        );
        assert_eq!(
            header("#!lua name=a foo=bar\n"),
            Err("Invalid metadata value given: foo=bar".into())
        );
        assert_eq!(header("#!js name=a\n"), Err("Engine 'js' not found".into()));
        assert!(header("#!lua name=a-b\n").is_err_and(|e| e.starts_with("Library names")));
    }

    #[test]
    fn script_lines_give_their_flags() {
        let header = |code: &str| script_header(code.as_bytes());
        assert_eq!(header("return 1"), Ok(None));
        assert_eq!(header("#!lua\nreturn 1"), Ok(Some((Flags::default(), 5))));
        let (flags, _) = header("#!lua flags=no-writes,allow-oom\n")
            .ok()
            .flatten()
            .expect("flags");
        assert!(flags.no_writes());
        assert_eq!(
            flags.names().collect::<Vec<_>>(),
            ["no-writes", "allow-oom"]
        );
        assert_eq!(header("#!lua"), Err("Invalid script shebang".into()));
        assert_eq!(
            header("#!js\n"),
            Err("Unexpected engine in script shebang: #!js".into())
        );
        assert_eq!(
            header("#!lua flags=foo\n"),
            Err("Unexpected flag in script shebang: foo".into())
        );
        assert_eq!(
            header("#!lua name=x\n"),
            Err("Unknown lua shebang option: name=x".into())
        );
    }

    fn library(name: &str, functions: &[&str]) -> Library {
        Library {
            name: name.into(),
            code: Arc::from(&b""[..]),
            code_start: 0,
            functions: functions
                .iter()
                .map(|f| FunctionSpec {
                    name: f.to_string(),
                    description: None,
                    flags: Flags::default(),
                })
                .collect(),
        }
    }

    #[test]
    fn changes_collide_as_in_redis_and_install_a_new_version() {
        let libraries = Libraries::default();
        let installed = || libraries.all().0;
        let set = merged(
            &installed(),
            vec![library("a", &["f", "g"])],
            Policy::Append,
        );
        libraries.install(set.expect("merges"));
        assert_eq!(libraries.version(), 1);
        assert_eq!(
            libraries
                .function(b"G")
                .map(|(lib, at)| (lib.name.clone(), at)),
            Some(("a".into(), 1))
        );
        assert_eq!(
            merged(&installed(), vec![library("a", &["h"])], Policy::Append),
            Err("Library 'a' already exists".into())
        );
        assert_eq!(
            merged(&installed(), vec![library("b", &["F"])], Policy::Append),
            Err("Function F already exists".into())
        );
        let replaced = merged(&installed(), vec![library("a", &["h"])], Policy::Replace);
        assert_eq!(replaced.map(|set| set["a"].functions.len()), Ok(1));
        let flushed = merged(&installed(), vec![library("b", &["f"])], Policy::Flush);
        assert_eq!(flushed.map(|set| set.len()), Ok(1));
        assert!(without(&installed(), "nosuch").is_none());
        libraries.install(without(&installed(), "a").expect("there"));
        assert!(libraries.function(b"f").is_none());
        assert_eq!(libraries.version(), 2);
    }

    #[test]
    fn a_blocks_changes_show_in_its_view_and_are_installed_only_when_applied() {
        let libraries = Libraries::default();
        libraries.install(
            merged(
                &LibrarySet::new(),
                vec![library("a", &["f"])],
                Policy::Append,
            )
            .expect("merges"),
        );
        let mut view = BlockLibraries::new(&libraries);
        assert!(view.changed().is_none());
        assert!(
            view.function(b"F").is_some(),
            "the installed set shows through"
        );
        let base = view.begin_change();
        view.changed_to(merged(&base, vec![library("b", &["g"])], Policy::Append).expect("merges"));
        let name_at =
            |found: Option<(Arc<Library>, usize)>| found.map(|(lib, at)| (lib.name.clone(), at));
        assert_eq!(name_at(view.function(b"G")), Some(("b".into(), 0)));
        assert_eq!(name_at(view.function(b"f")), Some(("a".into(), 0)));
        assert!(
            libraries.function(b"g").is_none(),
            "not installed before the block ran"
        );
        let base = view.begin_change();
        view.changed_to(without(&base, "a").expect("there"));
        assert!(view.function(b"f").is_none());
        drop(view); // a block that did not run
        assert_eq!(libraries.version(), 1);
        assert!(libraries.function(b"g").is_none());
        let mut view = BlockLibraries::new(&libraries);
        let base = view.begin_change();
        view.changed_to(merged(&base, vec![library("b", &["g"])], Policy::Append).expect("merges"));
        view.apply();
        assert_eq!(libraries.version(), 2);
        assert_eq!(name_at(libraries.function(b"G")), Some(("b".into(), 0)));
        assert!(
            libraries.changing.try_lock().is_some(),
            "the guard went with the view"
        );
    }
}
