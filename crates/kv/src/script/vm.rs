//! One event loop's Lua state, and a script's run in a transaction's context.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use mlua::{
    Function, HookTriggers, Lua, LuaOptions, LuaString, MultiValue, StdLib, Table, Value, Variadic,
    VmState,
};
use tailstore_resp::{Protocol, Reply};

use super::convert::{lua_to_reply, reply_to_lua, single_field};
use super::library::{
    check_name, function_in, script_header, Flags, FunctionSpec, Libraries, LibrarySet,
    LibrarySource,
};
use super::{bit, cjson, cmsgpack, sha1_hex, Scripts, LOAD_TIME_LIMIT};
use crate::command::{
    lookup, refused_in_script, subcommand_check, Command, Ctx, Fault, MapChange, Run,
};
use crate::keyspace::notifications::KeyEvent;

/// Builds the sandbox from the real globals: the read-only view scripts run in, around
/// Redis's `redis` table (filled by the Rust side, `call` anew for each script), and the
/// runner that calls a script under the error handler. `catch` turns an error raised by
/// `redis.call` into the text Redis 7.0's `pcall` hands a script.
const PRELUDE: &str = r#"
local real, redis, catch, handler, cjson, cmsgpack, bit, stopped = ...
local error, setmetatable, tostring, pcall, xpcall = error, setmetatable, tostring, pcall, xpcall

local function readonly(t)
  return setmetatable({}, {
    __index = t,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = false,
  })
end

local visible = {
  _VERSION = _VERSION,
  redis = readonly(redis),
  string = readonly(string), table = readonly(table), math = readonly(math),
  cjson = readonly(cjson), cmsgpack = readonly(cmsgpack), bit = readonly(bit),
}
for _, name in ipairs({'assert', 'error', 'getmetatable', 'ipairs', 'next', 'pairs',
    'rawequal', 'rawget', 'select', 'setmetatable', 'tonumber', 'tostring', 'type',
    'unpack'}) do
  visible[name] = real[name]
end
-- Once the server has stopped the script (its time limit, SCRIPT KILL), no `pcall` may
-- catch that: its error goes on up, out of every `pcall` the script is in.
local function caught(ok, ...)
  if ok then return ok, ... end
  if stopped() then error((...), 0) end
  return ok, catch((...))
end
visible.pcall = function(f, ...) return caught(pcall(f, ...)) end
-- redis.call is the Rust side's, set for each script (a C function, so that the script's
-- frame, and the line an error is reported at, survives a `return redis.call(...)`).
function redis.pcall(...)
  local ok, reply = pcall(rawget(redis, 'call'), ...)
  if ok then return reply end
  return {err = catch(reply)}
end
local loadstring, setfenv = loadstring, setfenv
visible.xpcall = function(f, h)
  return caught(xpcall(f, function(e)
    if stopped() then return e end
    return h(catch(e))
  end))
end
-- Strings' methods are the real string library: their metatable is out of reach too.
getmetatable('').__metatable = false

-- A read-only table whose fields are `lookup`'s answers; a missing one is an error (a
-- script's globals, and the `redis` table a library sees while it loads).
local function guarded(lookup)
  return setmetatable({}, {
    __index = function(_, name)
      local value = lookup(name)
      if value == nil then
        error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
      end
      return value
    end,
    __newindex = function() error('Attempt to modify a readonly table', 2) end,
    __metatable = false,
  })
end

local env = guarded(function(name) return visible[name] end)
visible._G = env
-- Code a script compiles runs in the scripts' globals, not the real ones.
-- Text only: Lua 5.1 trusts the bytecode it loads, and crafted bytecode reads and writes
-- memory outside the sandbox (Redis's Lua refuses it the same way).
visible.loadstring = function(code, name)
  if type(code) == 'string' and code:byte(1) == 27 then
    return nil, 'binary chunks are not loaded'
  end
  local f, err = loadstring(code, name)
  if f then setfenv(f, env) end
  return f, err
end

local function run(script)
  return xpcall(script, handler)
end

-- Functions (FUNCTION LOAD, FCALL). A library's code runs once, at its load, with only
-- `redis.register_function`, `redis.log` and a few constants in reach (Redis 7.0's
-- library API); the functions it registers run later seeing what scripts see, but for
-- KEYS and ARGV: their keys and arguments are their parameters.
local loading = false
local load_redis = {}
local load_api = {redis = guarded(function(name) return load_redis[name] end)}
local functions_env
functions_env = guarded(function(name)
  if loading then
    return load_api[name]
  elseif name == '_G' then
    return functions_env
  elseif name ~= 'KEYS' and name ~= 'ARGV' then
    return visible[name]
  end
end)
local function set_loading(on) loading = on end
local function run_function(f, keys, args)
  return xpcall(function() return f(keys, args) end, handler)
end
return env, visible, run, functions_env, load_redis, set_loading, run_function
"#;

/// An error raised by the Rust side of the `redis` table (`redis.call`'s error reply,
/// `redis.setresp`'s refusal) or of a library, with the script's line that called it.
#[derive(Debug, thiserror::Error)]
#[error("{text}")]
struct Raised {
    /// What `pcall` hands the script.
    text: String,
    /// Put before `text` in the client's error reply ("ERR " for a library's error, whose
    /// text is not a reply's).
    reply_prefix: &'static str,
    line: Option<usize>,
}

impl Raised {
    fn error(lua: &Lua, text: impl Into<String>) -> mlua::Error {
        mlua::Error::external(Raised {
            text: text.into(),
            reply_prefix: "",
            line: script_line(lua),
        })
    }
}

/// A library function's error, as Lua's `luaL_error` raises one (`placed`): its text after
/// the place of the function's caller (`user_script:3: Bad data format in input.`; nothing
/// when a C function such as `pcall` called it). A C function called in a tail call keeps
/// its caller's frame in Lua 5.1, so the place is known even in `return cmsgpack.unpack(…)`.
pub(super) fn library_error(lua: &Lua, text: impl std::fmt::Display, placed: bool) -> mlua::Error {
    let place = placed
        .then(|| {
            lua.inspect_stack(1, |caller| {
                let line = caller.current_line()?;
                let source = caller.source().short_src?.into_owned();
                Some(format!("{source}:{line}: "))
            })
            .flatten()
        })
        .flatten()
        .unwrap_or_default();
    mlua::Error::external(Raised {
        text: format!("{place}{text}"),
        reply_prefix: "ERR ",
        line: script_line(lua),
    })
}

/// `luaL_argerror`'s error: argument `at` of the running library function, by the name its
/// caller used for it (`?` when it has none, as when `pcall` calls it).
pub(super) fn argument_error(lua: &Lua, at: usize, message: &str) -> mlua::Error {
    let name = lua
        .inspect_stack(0, |running| running.names().name.map(|n| n.into_owned()))
        .flatten()
        .unwrap_or_else(|| "?".to_string());
    library_error(
        lua,
        format!("bad argument #{at} to '{name}' ({message})"),
        true,
    )
}

/// What the server lends a running script besides the data commands.
pub trait Host {
    /// A run of the script begins (again, after a conflict): forget the effects the host
    /// collected for the previous run.
    fn begin(&mut self);
    /// A command that is not a data command, called by the script in database `*db`: its
    /// reply (SELECT changes `*db`), or `None` if scripts may not call it.
    fn server_command(
        &mut self,
        command: &Command,
        args: &[Vec<u8>],
        db: &mut u32,
    ) -> Option<Reply>;
    /// The script's write command `args` ran in database `db` (for blocked clients).
    fn wrote(&mut self, db: u32, command: &Command, args: &[Vec<u8>]);
    /// The key events of the data command the script just called, in order with its
    /// PUBLISHes (kept, like them, only if the script's transaction commits).
    fn notified(&mut self, events: Vec<KeyEvent>);
    /// The script called `command` (`args`) in database `db` and it ran (for MONITOR).
    fn called(&mut self, db: u32, command: &Command, args: &[Vec<u8>]);
    /// The code starts running, SCRIPT KILL and FUNCTION KILL able to stop it from now on:
    /// a function (its name and the command that called it) or a script (`None`).
    fn started(&mut self, _function: Option<(&str, &[Vec<u8>])>) {}
    /// The code stopped running.
    fn finished(&mut self) {}
    /// The error a call of `command` (`args`) raises because the client's ACL user may
    /// not run it; `None` if it may.
    fn denied(&mut self, _command: &Command, _args: &[Vec<u8>]) -> Option<Reply> {
        None
    }
    /// SWAPDB, FLUSHDB or FLUSHALL (`args`), called in database `db`: the change of the map
    /// of databases it asks for, or the refusal of its arguments; `None` for any other
    /// command.
    fn map_change(
        &mut self,
        _command: &Command,
        _args: &[Vec<u8>],
        _db: u32,
    ) -> Option<Result<MapChange, Reply>> {
        None
    }
    /// The script changed the map of databases (in its transaction, not committed yet).
    fn changed_map(&mut self, _change: MapChange) {}
}

/// What EVAL (EVALSHA, FCALL…) asked for.
pub struct Invocation<'a> {
    pub target: Target<'a>,
    /// The whole command that asked for it (FUNCTION STATS shows a running function's).
    pub command: &'a [Vec<u8>],
    pub keys: &'a [Vec<u8>],
    pub argv: &'a [Vec<u8>],
    /// EVAL_RO, FCALL_RO, or a script or function declared `no-writes`: write commands
    /// are refused.
    pub read_only: bool,
    /// The client's protocol, for the result's conversion.
    pub protocol: Protocol,
}

/// The code an invocation runs.
#[derive(Clone, Copy)]
pub enum Target<'a> {
    /// A script, by its SHA1 and its body (EVAL, EVALSHA).
    Script { sha: &'a str, body: &'a [u8] },
    /// A function of one of `libraries`, by its name in any case (FCALL).
    Function {
        name: &'a str,
        libraries: LibrarySource<'a>,
    },
}

impl Target<'_> {
    /// How Redis names the code in an error's "script: NAME, on @CHUNK:LINE.".
    fn names(&self) -> (&str, &'static str) {
        match self {
            Target::Script { sha, .. } => (sha, SCRIPT_CHUNK),
            Target::Function { name, .. } => (name, FUNCTION_CHUNK),
        }
    }
}

/// The chunk names scripts' and libraries' code is compiled under: what Lua's error
/// messages and Redis's replies call them (`user_script:3: …`).
const SCRIPT_CHUNK: &str = "user_script";
const FUNCTION_CHUNK: &str = "user_function";

/// How long a stored library's code may run at the server's start (see
/// [`Vm::load_stored_library`]).
const STORED_LOAD_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What a library's load registered: each function's spec, and its callbacks in a Lua
/// table by lowercase name.
///
/// Why Lua tables, not Rust handles: each `mlua::Function` held from Rust takes a slot of
/// mlua's reference stack, which Lua 5.1 bounds at about 8,000; past that every new script
/// and function failed with "out of Lua stack" (a loop that had compiled 8,000 distinct
/// EVAL scripts ran no new one, and a library of 10,000 functions did not load). A table
/// holds any number of them behind one slot, and a call takes one out for its run.
struct Loaded {
    specs: Vec<FunctionSpec>,
    callbacks: Table,
}

/// An event loop's Lua state, made at its first script.
#[derive(Default)]
pub struct Vm {
    sandbox: OnceCell<Sandbox>,
}

struct Sandbox {
    lua: Lua,
    /// What stops the running script (its hook reads them).
    limits: Rc<Limits>,
    /// The globals scripts see (read-only).
    env: Table,
    /// What the scripts' globals look up: KEYS and ARGV, new tables for each script (one
    /// script's metatable on them would otherwise run in the next, another user's too).
    visible: Table,
    /// The `redis` table behind its read-only view.
    redis: Table,
    /// Whether the running script asked for RESP3 replies (`redis.setresp(3)`).
    resp3: Rc<Cell<bool>>,
    /// Calls a script under the error handler: `ok, result`.
    runner: Function,
    /// The loop's compiled scripts by SHA1 (a Lua table: see [`Loaded`]), and the SCRIPT
    /// FLUSH count they belong to.
    compiled: RefCell<Table>,
    flushes: Cell<u64>,
    /// Functions' globals (see the prelude), the `redis` table a library's code sees,
    /// the switch between a library's load and its functions' runs, and their runner.
    functions_env: Table,
    load_redis: Table,
    set_loading: Function,
    run_function: Function,
    /// The loop's functions by name in lowercase (a Lua table), loaded from the libraries'
    /// version `functions_version`, and the libraries of that version that did not load
    /// here, with why.
    functions: RefCell<Table>,
    functions_version: Cell<Option<u64>>,
    failed_libraries: RefCell<HashMap<String, String>>,
}

/// A run's state that `redis.call` works with.
struct Call<'r, 't, 'db> {
    ctx: &'r mut Ctx<'t, 'db>,
    host: &'r mut dyn Host,
    read_only: bool,
    /// An engine error or torn read: the script stops, and the transaction with it.
    fault: Option<Fault>,
}

impl Vm {
    /// Compiles `body`, whose SHA1 is `sha`, on this loop if it was not already: whether it
    /// was not (then [`Scripts`] may not have it either), or the error reply if it does not
    /// compile.
    pub fn compile(&self, scripts: &Scripts, sha: &str, body: &[u8]) -> Result<bool, Reply> {
        self.sandbox(scripts)?
            .function(scripts, sha, body)
            .map(|(_, new)| new)
    }

    /// Runs a library's `code` (its `#!lua` line ends before `code_start`) as FUNCTION LOAD
    /// does: the functions it registers, or Redis's error text.
    pub fn load_library(
        &self,
        scripts: &Scripts,
        code: &[u8],
        code_start: usize,
    ) -> Result<Vec<FunctionSpec>, String> {
        self.load_library_within(scripts, code, code_start, LOAD_TIME_LIMIT)
    }

    /// [`Vm::load_library`] for a library stored in the database, at the server's start:
    /// FUNCTION LOAD accepted it within [`LOAD_TIME_LIMIT`] on a loop that was not busy,
    /// and a start on a busy machine must not refuse it for running longer. Only code that
    /// never ends is stopped, after [`STORED_LOAD_TIME_LIMIT`].
    pub fn load_stored_library(
        &self,
        scripts: &Scripts,
        code: &[u8],
        code_start: usize,
    ) -> Result<Vec<FunctionSpec>, String> {
        self.load_library_within(scripts, code, code_start, STORED_LOAD_TIME_LIMIT)
    }

    fn load_library_within(
        &self,
        scripts: &Scripts,
        code: &[u8],
        code_start: usize,
        limit: std::time::Duration,
    ) -> Result<Vec<FunctionSpec>, String> {
        let sandbox = self.sandbox(scripts).map_err(|reply| match reply {
            Reply::Error(text) => text,
            other => format!("{other:?}"),
        })?;
        sandbox
            .load_library(&code[code_start..], limit)
            .map(|loaded| loaded.specs)
    }

    /// Runs the script in `ctx`'s transaction: its reply (an error reply when it failed, its
    /// writes until then kept), or the fault that must undo the transaction.
    pub fn run(
        &self,
        scripts: &Scripts,
        ctx: &mut Ctx<'_, '_>,
        invocation: &Invocation<'_>,
        host: &mut dyn Host,
    ) -> Result<Reply, Fault> {
        let sandbox = self.sandbox(scripts).map_err(Fault::Reply)?;
        let found = match invocation.target {
            Target::Script { sha, body } => sandbox.function(scripts, sha, body).map(|(f, _)| f),
            Target::Function { name, libraries } => match libraries {
                LibrarySource::Installed(libraries) => sandbox.function_named(libraries, name),
                LibrarySource::Block(set) => sandbox.function_of_block(set, name),
            },
        };
        let function = match found {
            Ok(function) => function,
            Err(reply) => return Ok(reply),
        };
        host.begin();
        let mut call = Call {
            ctx,
            host,
            read_only: invocation.read_only,
            fault: None,
        };
        sandbox.run(scripts, &function, invocation, &mut call)
    }

    fn sandbox(&self, scripts: &Scripts) -> Result<&Sandbox, Reply> {
        if let Some(sandbox) = self.sandbox.get() {
            return Ok(sandbox);
        }
        let sandbox = Sandbox::new(scripts)
            .map_err(|err| Reply::error(format!("ERR tailstore: could not start Lua: {err}")))?;
        Ok(self.sandbox.get_or_init(|| sandbox))
    }
}

impl Sandbox {
    fn new(scripts: &Scripts) -> mlua::Result<Sandbox> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        // Lua's allocator refuses what would pass the limit. Checked by the hook instead,
        // one call could allocate any amount between two checks (see `Limits`).
        lua.set_memory_limit(scripts.memory_limit())?;
        anchor_chunk_names(&lua)?;
        let limits = Rc::new(Limits::new(scripts));
        limits.watch(&lua)?;
        let resp3 = Rc::new(Cell::new(false));
        let redis = redis_table(&lua, resp3.clone())?;
        let catch = lua.create_function(|lua, error: Value| match &error {
            Value::Error(err) => match err.downcast_ref::<Raised>() {
                Some(raised) => Ok(Value::String(lua.create_string(&raised.text)?)),
                None => Ok(error),
            },
            _ => Ok(error),
        })?;
        let handler = lua.create_function(locate_error)?;
        let stopped = {
            let limits = limits.clone();
            lua.create_function(move |_, ()| Ok(limits.stopped.get().is_some()))?
        };
        let (env, visible, runner, functions_env, load_redis, set_loading, run_function): (
            Table,
            Table,
            Function,
            Table,
            Table,
            Function,
            Function,
        ) = lua.load(PRELUDE).set_name("=prelude").call((
            lua.globals(),
            redis.clone(),
            catch,
            handler,
            cjson::library(&lua)?,
            cmsgpack::library(&lua)?,
            bit::library(&lua)?,
            stopped,
        ))?;
        fill_library_api(&lua, &load_redis)?;
        Ok(Sandbox {
            limits,
            env,
            visible,
            redis,
            resp3,
            runner,
            compiled: RefCell::new(lua.create_table()?),
            flushes: Cell::new(0),
            functions_env,
            load_redis,
            set_loading,
            run_function,
            functions: RefCell::new(lua.create_table()?),
            functions_version: Cell::new(None),
            failed_libraries: RefCell::new(HashMap::new()),
            lua,
        })
    }

    /// The compiled script, compiling it on its first run on this loop (then `true`).
    fn function(
        &self,
        scripts: &Scripts,
        sha: &str,
        body: &[u8],
    ) -> Result<(Function, bool), Reply> {
        let flushes = scripts.flushes();
        if self.flushes.replace(flushes) != flushes {
            *self.compiled.borrow_mut() = self.lua.create_table().map_err(lua_fault)?;
        }
        let compiled = self.compiled.borrow();
        if let Some(function) = compiled
            .raw_get::<Option<Function>>(sha)
            .map_err(lua_fault)?
        {
            return Ok((function, false));
        }
        let code = match script_header(body) {
            Ok(None) => body,
            Ok(Some((_, code_start))) => &body[code_start..],
            Err(text) => return Err(Reply::Error(format!("ERR {text}"))),
        };
        let function = self
            .compile_in(code, SCRIPT_CHUNK, &self.env)
            .map_err(|message| {
                Reply::error(format!(
                    "ERR Error compiling script (new function): {message}"
                ))
            })?;
        compiled.raw_set(sha, function.clone()).map_err(lua_fault)?;
        Ok((function, true))
    }

    /// `code` compiled as the chunk `chunk` with the globals `env`; Lua's message (its
    /// first line) if it does not compile.
    fn compile_in(&self, code: &[u8], chunk: &str, env: &Table) -> Result<Function, String> {
        self.lua
            .load(code)
            .set_mode(mlua::chunk::ChunkMode::Text)
            .set_name(format!("@{chunk}"))
            .set_environment(env.clone())
            .into_function()
            .map_err(|err| match &err {
                mlua::Error::SyntaxError { message, .. } => first_line(message),
                other => first_line(other),
            })
    }

    /// The function `name` (any case) of a set of libraries an EXEC block's FUNCTION
    /// changes left: its library loaded for this call, the loop's functions (those of the
    /// installed set) left as they are. Only FCALLs after a change in the same block pay
    /// for the load.
    fn function_of_block(&self, set: &LibrarySet, name: &str) -> Result<Function, Reply> {
        let not_found = || Reply::error("ERR Function not found");
        let (library, _) = function_in(set, name.as_bytes()).ok_or_else(not_found)?;
        let loaded = self
            .load_library(&library.code[library.code_start..], LOAD_TIME_LIMIT)
            .map_err(|text| Reply::Error(format!("ERR {text}")))?;
        let callback: Option<Function> = loaded
            .callbacks
            .raw_get(name.to_ascii_lowercase())
            .map_err(lua_fault)?;
        callback.ok_or_else(not_found)
    }

    /// The loop's function `name` (any case), loading the libraries again if they changed
    /// since it last did.
    fn function_named(&self, libraries: &Libraries, name: &str) -> Result<Function, Reply> {
        if self.functions_version.get() != Some(libraries.version()) {
            self.load_functions(libraries).map_err(lua_fault)?;
        }
        let found: Option<Function> = self
            .functions
            .borrow()
            .raw_get(name.to_ascii_lowercase())
            .map_err(lua_fault)?;
        found.ok_or_else(|| self.not_found(libraries, name))
    }

    /// Loads every installed library into a new table of the loop's functions. A library
    /// loaded on another loop first loads here too unless this loop's memory is short,
    /// which is told (in the log, and to each FCALL of its functions) rather than hidden.
    fn load_functions(&self, libraries: &Libraries) -> mlua::Result<()> {
        let (set, version) = libraries.all();
        let functions = self.lua.create_table()?;
        let mut failed = HashMap::new();
        for library in set.values() {
            match self.load_library(&library.code[library.code_start..], LOAD_TIME_LIMIT) {
                Ok(loaded) => {
                    for pair in loaded.callbacks.pairs::<Value, Value>() {
                        let (name, callback) = pair?;
                        functions.raw_set(name, callback)?;
                    }
                }
                Err(text) => {
                    eprintln!(
                        "tailstore: library '{}' did not load on an event loop: {text}",
                        library.name
                    );
                    failed.insert(library.name.clone(), text);
                }
            }
        }
        *self.functions.borrow_mut() = functions;
        *self.failed_libraries.borrow_mut() = failed;
        self.functions_version.set(Some(version));
        Ok(())
    }

    /// FCALL's answer for a function this loop does not have: its library's failure to
    /// load here, if that is why, else Redis's "not found".
    fn not_found(&self, libraries: &Libraries, name: &str) -> Reply {
        let (set, _) = libraries.all();
        let failure = function_in(&set, name.as_bytes()).and_then(|(library, _)| {
            let failed = self.failed_libraries.borrow();
            Some((library.name.clone(), failed.get(&library.name)?.clone()))
        });
        match failure {
            Some((library, text)) => Reply::Error(format!(
                "ERR tailstore: library '{library}' did not load on this event loop: {text}"
            )),
            None => Reply::error("ERR Function not found"),
        }
    }

    /// Runs a library's Lua code (after its `#!lua` line) with the library API: the
    /// functions it registered, or Redis's error text.
    fn load_library(&self, code: &[u8], limit: std::time::Duration) -> Result<Loaded, String> {
        let chunk = self
            .compile_in(code, FUNCTION_CHUNK, &self.functions_env)
            .map_err(|message| format!("Error compiling function: {message}"))?;
        let lua_error = |err: mlua::Error| format!("tailstore: Lua: {err}");
        let registered = RefCell::new(Registrations {
            specs: Vec::new(),
            names: HashSet::new(),
            callbacks: self.lua.create_table().map_err(lua_error)?,
        });
        self.limits.start_for(limit);
        self.set_loading.call::<()>(true).map_err(lua_error)?;
        let outcome = self.lua.scope(|scope| {
            let registered = &registered;
            let register = scope.create_function(move |lua, args: Variadic<Value>| {
                register_function(lua, args, &mut registered.borrow_mut())
            })?;
            self.load_redis.raw_set("register_function", register)?;
            self.runner.call::<MultiValue>(chunk)
        });
        let _ = self.set_loading.call::<()>(false);
        let _ = self.load_redis.raw_set("register_function", Value::Nil);
        let stopped = self.limits.stopped.take();
        let values = outcome.map_err(lua_error)?;
        let mut values = values.into_iter();
        if !matches!(values.next(), Some(Value::Boolean(true))) {
            if matches!(stopped, Some(Stop::TooLong(_))) {
                return Err("Error registering functions: ERR FUNCTION LOAD timeout".into());
            }
            let failure = failure_reply(&values.next().unwrap_or(Value::Nil), None);
            let text = match failure {
                Reply::Error(text) => text,
                _ => String::new(),
            };
            return Err(format!("Error registering functions: {text}"));
        }
        let registered = registered.into_inner();
        if registered.specs.is_empty() {
            return Err("No functions registered".into());
        }
        Ok(Loaded {
            specs: registered.specs,
            callbacks: registered.callbacks,
        })
    }

    fn run(
        &self,
        scripts: &Scripts,
        function: &Function,
        invocation: &Invocation<'_>,
        call: &mut Call<'_, '_, '_>,
    ) -> Result<Reply, Fault> {
        let lua_error = |err: mlua::Error| Fault::err(format!("ERR tailstore: Lua: {err}"));
        let parameters = match invocation.target {
            Target::Script { .. } => {
                self.set_arguments(invocation.keys, invocation.argv)
                    .map_err(lua_error)?;
                None
            }
            Target::Function { .. } => Some((
                self.sequence(invocation.keys).map_err(lua_error)?,
                self.sequence(invocation.argv).map_err(lua_error)?,
            )),
        };
        self.resp3.set(false);
        self.limits.start();
        scripts.running.fetch_add(1, Ordering::SeqCst);
        let listed = match invocation.target {
            Target::Function { name, .. } => Some((name, invocation.command)),
            Target::Script { .. } => None,
        };
        call.host.started(listed);
        let call = RefCell::new(call);
        let outcome = self.lua.scope(|scope| {
            let (call, resp3) = (&call, self.resp3.clone());
            let command = scope.create_function(move |lua, args: Variadic<Value>| {
                call.borrow_mut().command(lua, args, resp3.get())
            })?;
            // Left in place after the scope: a destroyed scoped function only raises an
            // error, and the next script replaces it.
            self.redis.raw_set("call", command)?;
            match &parameters {
                None => self.runner.call::<MultiValue>(function.clone()),
                Some((keys, args)) => {
                    self.run_function
                        .call::<MultiValue>((function.clone(), keys, args))
                }
            }
        });
        let call = call.into_inner();
        call.host.finished();
        scripts.running.fetch_sub(1, Ordering::SeqCst);
        let large = |items: &[Vec<u8>]| items.iter().map(Vec::len).sum::<usize>() > 64 * 1024;
        if parameters.is_none() && (large(invocation.keys) || large(invocation.argv)) {
            // Large arguments are not kept alive until the next script.
            let _ = self.set_arguments(&[], &[]);
        }
        if let Some(fault) = call.fault.take() {
            return Err(fault);
        }
        let values = outcome.map_err(lua_error)?;
        let mut values = values.into_iter();
        let ok = matches!(values.next(), Some(Value::Boolean(true)));
        let result = values.next().unwrap_or(Value::Nil);
        if !ok && is_memory_failure(&result) {
            self.limits
                .stopped
                .set(Some(Stop::Memory(scripts.memory_limit())));
            let _ = self.lua.gc_collect(); // what it held is garbage now
        }
        if let Some(stop) = self.limits.stopped.get() {
            return Err(Fault::err(format!(
                "ERR tailstore: the script was stopped ({stop}); its writes were undone"
            )));
        }
        Ok(if ok {
            lua_to_reply(&result, invocation.protocol, self.resp3.get())
        } else {
            failure_reply(&result, Some(invocation.target.names()))
        })
    }

    /// A function's keys or arguments: a new table for each call, as Redis makes them.
    fn sequence(&self, items: &[Vec<u8>]) -> mlua::Result<Table> {
        let strings = items.iter().map(|item| self.lua.create_string(item));
        self.lua
            .create_sequence_from(strings.collect::<mlua::Result<Vec<_>>>()?)
    }

    fn set_arguments(&self, keys: &[Vec<u8>], argv: &[Vec<u8>]) -> mlua::Result<()> {
        self.visible.raw_set("KEYS", self.sequence(keys)?)?;
        self.visible.raw_set("ARGV", self.sequence(argv)?)
    }
}

/// Why the server stopped a script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    Killed,
    /// It ran past its time limit.
    TooLong(std::time::Duration),
    /// An allocation past the state's limit (in bytes) was refused.
    Memory(usize),
}

impl std::fmt::Display for Stop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stop::Killed => write!(f, "SCRIPT KILL"),
            Stop::TooLong(limit) if limit.subsec_millis() == 0 => {
                write!(f, "it ran longer than {} s", limit.as_secs())
            }
            Stop::TooLong(limit) => write!(f, "it ran longer than {} ms", limit.as_millis()),
            Stop::Memory(limit) => write!(
                f,
                "its Lua state would have held more than {} MiB",
                limit >> 20
            ),
        }
    }
}

/// The running script's limits checked by a hook every [`CHECK_EVERY`] instructions: its
/// deadline and SCRIPT KILL. Memory is limited by Lua's allocator instead (see
/// `Sandbox::new`): between two checks one `string.rep`, or a loop doubling a string with
/// `..`, can allocate gigabytes.
struct Limits {
    /// How long a script may run (`Scripts::time_limit`).
    script_time: std::time::Duration,
    /// What is running now may run this long (a script, or a library's load).
    allowed: Cell<std::time::Duration>,
    deadline: Cell<Instant>,
    kills: Arc<AtomicU64>,
    kills_at_start: Cell<u64>,
    stopped: Cell<Option<Stop>>,
}

/// Instructions between two checks of the limits.
const CHECK_EVERY: u32 = 1_000;

impl Limits {
    fn new(scripts: &Scripts) -> Limits {
        let script_time = scripts.time_limit();
        Limits {
            script_time,
            allowed: Cell::new(script_time),
            deadline: Cell::new(Instant::now() + script_time),
            kills: scripts.kills.clone(),
            kills_at_start: Cell::new(0),
            stopped: Cell::new(None),
        }
    }

    /// A script starts.
    fn start(&self) {
        self.start_for(self.script_time);
    }

    /// Code that may run for `limit` starts (a library's load).
    fn start_for(&self, limit: std::time::Duration) {
        self.allowed.set(limit);
        self.deadline.set(Instant::now() + limit);
        self.kills_at_start.set(self.kills.load(Ordering::SeqCst));
        self.stopped.set(None);
    }

    /// Installs the hook that raises an error in a script past its limits (and again at
    /// every check after, so that a `pcall` cannot keep it running).
    fn watch(self: &Rc<Self>, lua: &Lua) -> mlua::Result<()> {
        let limits = self.clone();
        lua.set_hook(
            HookTriggers::new().every_nth_instruction(CHECK_EVERY),
            move |_, _| {
                let stop = limits.stopped.get().or_else(|| limits.exceeded());
                match stop {
                    None => Ok(VmState::Continue),
                    Some(stop) => {
                        limits.stopped.set(Some(stop));
                        Err(mlua::Error::runtime(format!("script stopped: {stop}")))
                    }
                }
            },
        )
    }

    fn exceeded(&self) -> Option<Stop> {
        if self.kills.load(Ordering::SeqCst) != self.kills_at_start.get() {
            Some(Stop::Killed)
        } else if Instant::now() >= self.deadline.get() {
            Some(Stop::TooLong(self.allowed.get()))
        } else {
            None
        }
    }
}

impl Call<'_, '_, '_> {
    /// `redis.call`: the command's reply; an error reply is raised (`redis.pcall` catches
    /// it and returns it as `{err = …}`).
    fn command(&mut self, lua: &Lua, args: Variadic<Value>, resp3: bool) -> mlua::Result<Value> {
        if self.fault.is_some() {
            return Err(mlua::Error::runtime("tailstore: the transaction failed"));
        }
        let reply = match arguments(args) {
            Ok(args) => self.run(&args),
            Err(reply) => reply,
        };
        match reply {
            _ if self.fault.is_some() => {
                Err(mlua::Error::runtime("tailstore: the transaction failed"))
            }
            Reply::Error(text) => Err(Raised::error(lua, text)),
            reply => reply_to_lua(lua, reply, resp3),
        }
    }

    fn run(&mut self, args: &[Vec<u8>]) -> Reply {
        let Some(command) = lookup(&args[0]) else {
            return Reply::error("ERR Unknown Redis command called from script");
        };
        if !command.arity_ok(args.len()) {
            return Reply::error("ERR Wrong number of args calling Redis command from script");
        }
        if let Err(refusal) = subcommand_check(command, args) {
            // Redis looks subcommands up as commands of their own.
            return Reply::error(if refusal.contains("unknown subcommand") {
                "ERR Unknown Redis command called from script"
            } else {
                "ERR Wrong number of args calling Redis command from script"
            });
        }
        // The blocking pops and moves (BLPOP, BRPOPLPUSH, BZPOPMIN…), as Redis refuses
        // every command flagged `noscript`, before its ACL check.
        if matches!(command.run, Run::Data(_)) && command.flags.contains(&"noscript") {
            return Reply::error("ERR This Redis command is not allowed from script");
        }
        if let Some(refusal) = self.host.denied(command, args) {
            return refusal;
        }
        // As Redis, a command that may replicate (PFCOUNT writes its cached count, PUBLISH
        // sends) counts as a write here, so that read-only scripts may run during a WRITE
        // pause.
        if self.read_only && (command.is_write() || command.may_replicate()) {
            return Reply::error("ERR Write commands are not allowed from read-only scripts.");
        }
        if let Some(refusal) = refused_in_script(command, args) {
            return refusal;
        }
        if let Some(change) = self.host.map_change(command, args, self.ctx.db) {
            return self.change_map(command, args, change);
        }
        let Run::Data(handler) = command.run else {
            let Some(reply) = self.host.server_command(command, args, &mut self.ctx.db) else {
                return Reply::error("ERR This Redis command is not allowed from script");
            };
            self.host.called(self.ctx.db, command, args);
            return reply;
        };
        // Only this call's: in an EXEC block the transaction's events before the script
        // are the block's earlier commands', published in their own places.
        let earlier = self.ctx.events.len();
        let outcome = self.ctx.run(command, handler, args);
        let events = self.ctx.events.split_off(earlier);
        if !events.is_empty() {
            self.host.notified(events);
        }
        let reply = match outcome {
            Ok(reply) => reply,
            Err(Fault::Reply(reply)) => {
                self.host.called(self.ctx.db, command, args);
                return reply;
            }
            Err(fault) => {
                self.fault = Some(fault);
                return Reply::Null;
            }
        };
        self.host.called(self.ctx.db, command, args);
        if command.is_write() {
            self.host.wrote(self.ctx.db, command, args);
        }
        reply
    }

    /// SWAPDB, FLUSHDB or FLUSHALL in the script's transaction (the first run without the
    /// map's exclusive hold ends here, and the script runs again under it).
    fn change_map(
        &mut self,
        command: &Command,
        args: &[Vec<u8>],
        change: Result<MapChange, Reply>,
    ) -> Reply {
        let change = match change {
            Ok(change) => change,
            Err(refusal) => return refusal,
        };
        match self.ctx.ks.change_map_in(self.ctx.txn, change) {
            Ok(()) => {
                self.host.called(self.ctx.db, command, args);
                self.host.changed_map(change);
                Reply::ok()
            }
            Err(Fault::Reply(reply)) => reply,
            Err(fault) => {
                self.fault = Some(fault);
                Reply::Null
            }
        }
    }
}

/// `redis.call`'s arguments as a command: strings and numbers (as Lua writes them) only.
fn arguments(args: Variadic<Value>) -> Result<Vec<Vec<u8>>, Reply> {
    if args.is_empty() {
        return Err(Reply::error(
            "ERR Please specify at least one argument for this redis lib call",
        ));
    }
    // A number goes as `%.17g` writes it, as Redis 7.0 sends one: Lua's own `%.14g` would
    // turn 1700000000123456 into 1.7000000001235e+15.
    args.into_iter()
        .map(|arg| match arg {
            Value::String(s) => Some(s.as_bytes().to_vec()),
            Value::Integer(i) => Some(cjson::c_g(i as f64, 17).into_bytes()),
            Value::Number(x) => Some(cjson::c_g(x, 17).into_bytes()),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| {
            Reply::error("ERR Lua redis lib command arguments must be strings or integers")
        })
}

/// The error handler a script runs under: the error as `{err = text, line = …}`, the line
/// of the script where it was raised (Redis adds "script: SHA, on @user_script:LINE.").
fn locate_error(lua: &Lua, error: Value) -> mlua::Result<Table> {
    let memory = matches!(&error, Value::Error(err) if is_memory_error(err));
    let (text, line) = match error {
        Value::Error(err) if err.downcast_ref::<Raised>().is_some() => {
            let raised = err.downcast_ref::<Raised>();
            (
                raised
                    .map(|r| format!("{}{}", r.reply_prefix, r.text))
                    .unwrap_or_default(),
                raised.and_then(|r| r.line),
            )
        }
        Value::Table(table) if matches!(table.raw_get::<Value>("err"), Ok(Value::String(_))) => {
            let text: LuaString = table.raw_get("err")?;
            (lossy(&text), script_line(lua))
        }
        other => {
            // A string raised keeps its lines (the reply turns line ends into spaces, as
            // Redis's does); an error from Rust loses mlua's traceback.
            let text = match lua.coerce_string(other.clone()) {
                Ok(Some(text)) => lossy(&text),
                _ => match &other {
                    Value::Error(err) => first_line(err),
                    Value::Nil => "nil".to_string(),
                    _ => other.type_name().to_string(),
                },
            };
            (format!("ERR {text}"), script_line(lua))
        }
    };
    let table = lua.create_table()?;
    table.raw_set("err", text)?;
    table.raw_set("line", line)?;
    if memory {
        table.raw_set("memory", true)?;
    }
    Ok(table)
}

/// Keeps the names scripts and functions are compiled under referenced for the state's
/// life. Lua 5.1's parser interns a chunk's name and holds it unreferenced until the
/// chunk's prototype exists (Redis's CVE-2025-49844, fixed in its copy of `lparser.c`, not
/// in the vendored Lua here): a collection that completes in between frees a name just
/// made, and the prototype keeps a dangling pointer. A name already interned and reachable
/// is found alive instead. (`loadstring`'s names are its arguments, on the stack.)
fn anchor_chunk_names(lua: &Lua) -> mlua::Result<()> {
    let names = [SCRIPT_CHUNK, FUNCTION_CHUNK]
        .into_iter()
        .map(|chunk| lua.create_string(format!("@{chunk}")))
        .collect::<mlua::Result<Vec<_>>>()?;
    lua.set_named_registry_value("tailstore.chunk_names", names)
}

/// The line the script is at: its innermost frame on the stack.
fn script_line(lua: &Lua) -> Option<usize> {
    (1..64)
        .map_while(|level| {
            lua.inspect_stack(level, |frame| {
                let source = frame.source().source;
                let chunk = source.as_deref().and_then(|s| s.strip_prefix('@'));
                matches!(chunk, Some(SCRIPT_CHUNK | FUNCTION_CHUNK))
                    .then(|| frame.current_line())
                    .flatten()
            })
        })
        .flatten()
        .next()
}

fn lossy(text: &LuaString) -> String {
    String::from_utf8_lossy(&text.as_bytes()).into_owned()
}

/// Redis's `redis` table but for `call`, which each run sets, and `pcall` (the prelude's).
fn redis_table(lua: &Lua, resp3: Rc<Cell<bool>>) -> mlua::Result<Table> {
    let redis = lua.create_table()?;
    fill_library_api(lua, &redis)?;
    let sha1hex = |_: &Lua, text: LuaString| Ok(sha1_hex(&text.as_bytes()));
    redis.raw_set("sha1hex", lua.create_function(sha1hex)?)?;
    for (name, field) in [("error_reply", "err"), ("status_reply", "ok")] {
        let reply = lua.create_function(move |lua, args: Variadic<Value>| match &args[..] {
            [Value::String(text)] if field == "err" => {
                let text = lua.create_string(error_with_code(&text.as_bytes()))?;
                single_field(lua, field, Value::String(text))
            }
            [Value::String(text)] => single_field(lua, field, Value::String(text.clone())),
            // Returned, not raised, as Redis does.
            _ => single_field(
                lua,
                "err",
                Value::String(lua.create_string("ERR wrong number or type of arguments")?),
            ),
        })?;
        redis.raw_set(name, reply)?;
    }
    let setresp = lua.create_function(move |lua, version: Value| match version {
        Value::Integer(v @ (2 | 3)) => {
            resp3.set(v == 3);
            Ok(())
        }
        Value::Number(v) if v == 2.0 || v == 3.0 => {
            resp3.set(v == 3.0);
            Ok(())
        }
        _ => Err(Raised::error(lua, "ERR RESP version must be 2 or 3.")),
    })?;
    redis.raw_set("setresp", setresp)?;
    redis.raw_set("replicate_commands", lua.create_function(|_, ()| Ok(true))?)?;
    fill_replication_api(lua, &redis)?;
    Ok(redis)
}

/// Redis's replication flags and the calls that take them or serve its script debugger:
/// accepted and without effect here (no replicas, no AOF; no debugger session), so that
/// scripts written for Redis run.
fn fill_replication_api(lua: &Lua, redis: &Table) -> mlua::Result<()> {
    const REPL_ALL: i64 = 3;
    for (name, flags) in [
        ("REPL_NONE", 0),
        ("REPL_AOF", 1),
        ("REPL_SLAVE", 2),
        ("REPL_REPLICA", 2),
        ("REPL_ALL", REPL_ALL),
    ] {
        redis.raw_set(name, flags)?;
    }
    let set_repl = lua.create_function(|lua, args: Variadic<Value>| {
        let flags = match &args[..] {
            [Value::Integer(flags)] => *flags as f64,
            [Value::Number(flags)] => *flags,
            [_] => f64::NAN,
            _ => {
                return Err(Raised::error(
                    lua,
                    "ERR redis.set_repl() requires two arguments.",
                ))
            }
        };
        if (0.0..=REPL_ALL as f64).contains(&flags) {
            Ok(())
        } else {
            Err(Raised::error(
                lua,
                "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
            ))
        }
    })?;
    redis.raw_set("set_repl", set_repl)?;
    redis.raw_set("breakpoint", lua.create_function(|_, ()| Ok(false))?)?;
    redis.raw_set(
        "debug",
        lua.create_function(|_, _: Variadic<Value>| Ok(()))?,
    )
}

/// What Lua's allocator failure says (its `MEMERRMSG`).
const NOT_ENOUGH_MEMORY: &[u8] = b"not enough memory";

/// Whether a script failed because an allocation passed the memory limit: refused inside
/// Lua (which then calls no error handler: the message comes as it is) or inside one of our
/// functions (`locate_error` marks it).
fn is_memory_failure(error: &Value) -> bool {
    match error {
        Value::String(text) => *text.as_bytes() == *NOT_ENOUGH_MEMORY,
        Value::Table(table) => table.raw_get::<bool>("memory").unwrap_or(false),
        _ => false,
    }
}

fn is_memory_error(err: &mlua::Error) -> bool {
    match err {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } => is_memory_error(cause),
        _ => false,
    }
}

/// A failed script's reply: its error text and, given the code's `names` (see
/// [`Target::names`]), where in it the error was raised.
fn failure_reply(error: &Value, names: Option<(&str, &str)>) -> Reply {
    let table = match error {
        Value::Table(table) => table,
        // Lua calls no handler for an allocation failure: its message comes as it is.
        Value::String(text) => return Reply::Error(format!("ERR {}", lossy(text))),
        _ => return Reply::error("ERR tailstore: the script failed without an error value"),
    };
    let text = match table.raw_get::<Value>("err") {
        Ok(Value::String(text)) => lossy(&text),
        _ => "ERR the script failed".to_string(),
    };
    match (table.raw_get::<Option<i64>>("line"), names) {
        (Ok(Some(line)), Some((name, chunk))) => {
            Reply::Error(format!("{text} script: {name}, on @{chunk}:{line}."))
        }
        _ => Reply::Error(text),
    }
}

/// `redis.log(level, message…)`: the server's standard error, as Redis's log file.
fn log(lua: &Lua, args: Variadic<Value>) -> mlua::Result<()> {
    let [level, words @ ..] = &args[..] else {
        return Err(library_error(
            lua,
            "redis.log() requires two arguments or more.",
            false,
        ));
    };
    if words.is_empty() {
        return Err(library_error(
            lua,
            "redis.log() requires two arguments or more.",
            false,
        ));
    }
    let level = match level {
        Value::Integer(level) => *level,
        Value::Number(level) => *level as i64,
        _ => {
            return Err(library_error(
                lua,
                "First argument must be a number (log level).",
                false,
            ))
        }
    };
    if !(0..=3).contains(&level) {
        return Err(mlua::Error::runtime("Invalid debug level."));
    }
    let words: Vec<String> = words
        .iter()
        .map(|word| String::from_utf8_lossy(&text_of(lua, word).unwrap_or_default()).into_owned())
        .collect();
    eprintln!("tailstore: script log: {}", words.join(" "));
    Ok(())
}

/// `redis.error_reply`'s text as Redis 7.0 makes it (`luaPushErrorBuff`): an error code,
/// the text's first word, only when a space follows it, else "ERR"; a leading '-' and
/// line ends around the message taken off.
fn error_with_code(text: &[u8]) -> Vec<u8> {
    let text = text.strip_prefix(b"-").unwrap_or(text);
    let (code, message) = match text.iter().position(|&b| b == b' ') {
        Some(space) => (&text[..space], &text[space + 1..]),
        None => (&b"ERR"[..], text),
    };
    let line_end = |b: &u8| *b == b'\r' || *b == b'\n';
    let start = message
        .iter()
        .position(|b| !line_end(b))
        .unwrap_or(message.len());
    let end = message
        .iter()
        .rposition(|b| !line_end(b))
        .map_or(start, |at| at + 1);
    [code, b" ", &message[start..end]].concat()
}

/// The first line of an error's text (mlua adds a traceback after it).
fn first_line(text: &impl ToString) -> String {
    let text = text.to_string();
    text.lines().next().unwrap_or_default().to_string()
}

/// The `redis` table a library's code sees while it loads (Redis 7.0's library API):
/// `register_function` (set for each load), `log`, the log levels and the version.
fn fill_library_api(lua: &Lua, redis: &Table) -> mlua::Result<()> {
    for (at, name) in LOG_LEVELS.iter().enumerate() {
        redis.raw_set(*name, at)?;
    }
    redis.raw_set("log", lua.create_function(log)?)?;
    redis.raw_set("REDIS_VERSION", crate::REDIS_VERSION)?;
    redis.raw_set("REDIS_VERSION_NUM", redis_version_num())?;
    Ok(())
}

const LOG_LEVELS: [&str; 4] = ["LOG_DEBUG", "LOG_VERBOSE", "LOG_NOTICE", "LOG_WARNING"];

/// The version as one number, `0x00MMmmpp` (`redis.REDIS_VERSION_NUM`).
fn redis_version_num() -> i64 {
    crate::REDIS_VERSION
        .split('.')
        .take(3)
        .fold(0, |num, part| num << 8 | part.parse::<i64>().unwrap_or(0))
}

/// `redis.register_function(name, callback)` or `redis.register_function{function_name =
/// …, callback = …, flags = {…}, description = …}`, during a library's load: the function
/// added to `registered`, or Redis's error.
/// The functions a library's load has registered so far.
struct Registrations {
    specs: Vec<FunctionSpec>,
    /// Their names in lowercase: FCALL finds a function in any case.
    names: HashSet<String>,
    /// Their callbacks by lowercase name (see [`Loaded`]).
    callbacks: Table,
}

fn register_function(
    lua: &Lua,
    args: Variadic<Value>,
    registered: &mut Registrations,
) -> mlua::Result<()> {
    let refuse = |text: &str| library_error(lua, text, false);
    let (name, callback, description, flags) = match &args[..] {
        [Value::Table(named)] => named_registration(lua, named)?,
        [_] => return Err(refuse("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).")),
        [name, callback] => {
            let name = text_of(lua, name)
                .ok_or_else(|| refuse("first argument to redis.register_function must be a string"))?;
            let Value::Function(callback) = callback else {
                return Err(refuse("second argument to redis.register_function must be a function"));
            };
            (name, callback.clone(), None, Flags::default())
        }
        _ => return Err(refuse("wrong number of arguments to redis.register_function")),
    };
    let name = String::from_utf8_lossy(&name).into_owned();
    check_name(&name).map_err(|text| refuse(&text))?;
    // Redis 7.0.15 crashes on two names differing in case only; they would collide in
    // FCALL's lookup, so they are refused.
    let lowercase = name.to_ascii_lowercase();
    if !registered.names.insert(lowercase.clone()) {
        return Err(refuse("Function already exists in the library"));
    }
    registered.callbacks.raw_set(lowercase, callback)?;
    registered.specs.push(FunctionSpec {
        name,
        description,
        flags,
    });
    Ok(())
}

/// What a Lua string or number reads as (Lua's own coercion, as `lua_tostring`).
fn text_of(lua: &Lua, value: &Value) -> Option<Vec<u8>> {
    match value {
        Value::String(_) | Value::Integer(_) | Value::Number(_) => lua
            .coerce_string(value.clone())
            .ok()
            .flatten()
            .map(|s| s.as_bytes().to_vec()),
        _ => None,
    }
}

type Registration = (Vec<u8>, Function, Option<Vec<u8>>, Flags);

/// `redis.register_function`'s named arguments.
fn named_registration(lua: &Lua, named: &Table) -> mlua::Result<Registration> {
    let refuse = |text: &str| library_error(lua, text, false);
    let (mut name, mut callback, mut description, mut flags) = (None, None, None, Flags::default());
    for pair in named.pairs::<Value, Value>() {
        let (key, value) = pair?;
        let key = match &key {
            Value::String(key) => key.as_bytes().to_vec(),
            _ => return Err(refuse("unknown argument given to redis.register_function")),
        };
        match &key[..] {
            b"function_name" => {
                name = Some(text_of(lua, &value).ok_or_else(|| {
                    refuse(
                        "function_name argument given to redis.register_function must be a string",
                    )
                })?);
            }
            b"callback" => match value {
                Value::Function(f) => callback = Some(f),
                _ => {
                    return Err(refuse(
                        "callback argument given to redis.register_function must be a function",
                    ))
                }
            },
            b"description" => {
                description = Some(text_of(lua, &value).ok_or_else(|| {
                    refuse("description argument given to redis.register_function must be a string")
                })?);
            }
            b"flags" => {
                let Value::Table(names) = value else {
                    return Err(refuse("flags argument to redis.register_function must be a table representing function flags"));
                };
                for flag in names.sequence_values::<Value>() {
                    let flag = match flag? {
                        Value::String(flag) => Flags::named(&flag.as_bytes()),
                        _ => None,
                    };
                    flags = flags.with(flag.ok_or_else(|| refuse("unknown flag given"))?);
                }
            }
            _ => return Err(refuse("unknown argument given to redis.register_function")),
        }
    }
    let name =
        name.ok_or_else(|| refuse("redis.register_function must get a function name argument"))?;
    let callback =
        callback.ok_or_else(|| refuse("redis.register_function must get a callback argument"))?;
    Ok((name, callback, description, flags))
}

/// An error of the Lua state itself (not of a script): out of memory, or a reference it
/// could not take.
fn lua_fault(err: mlua::Error) -> Reply {
    Reply::Error(format!("ERR tailstore: Lua: {}", first_line(&err)))
}
