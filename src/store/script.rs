//! A script of `lua/` as Redis runs it: a Redis Function (`FCALL`) on Redis 7 and later and on
//! Valkey, or a script (`EVALSHA`) on Redis 6.2, for a user whose ACL refuses `FCALL` or
//! `FUNCTION LOAD`, for a call refused at `maxmemory` (see [`query_script`]), and with the
//! store's `functions: false`.
//!
//! Both run the same Lua and answer the same. What a Function saves is Redis's work at every call
//! of an `EVALSHA`: making the script's functions (closures) again and parsing its configuration
//! (`ARGV`'s leading arguments). A Function keeps both from one call to the next
//! (benchmark/RESULTS.md, item 38).
//!
//! # The Function of a script
//!
//! A script offers itself as a Function by having the lines [`CONFIGURED_HERE`]: what comes before
//! them (its configuration, read from `ARGV`, and the functions of its lone path, see
//! `lua/lone.lua`) is its *configured part*, which must define `lone_consume()` (a lone call's
//! answer; nil when the call is not one; false when it is but the lone path could not answer it,
//! having written nothing) and `configuration_args` (how many of `ARGV`'s leading arguments
//! configure it), and must keep nothing from one call to the next but what follows from its
//! configuration (caches keyed by what they cache, scratch tables each use fills). The library
//! (see [`function_library`]) runs the configured part once per configuration (the last 16 used
//! are kept), and at each call `lone_consume()`; when that does not answer, the whole script as
//! `EVALSHA` runs it, given that answer (so that it does not try the lone path again).
//!
//! The library has a second entry, `<name>_compact`, for the direct lane's lone calls (see
//! [`LuaScript::compact_request`]): the same Function, given `ARGV` up to the batch's shape as one
//! argument, its values joined by newlines. It keeps each configuration's `ARGV` built (16 of
//! them, then it starts again), writing a call's own arguments after it.
//!
//! Libraries are named by the script and a hash of their code (`ratekeeper_token_bucket_…`): two
//! versions of ratekeeper share a Redis (during a rolling deploy) without replacing each other's.
//! A library is loaded when Redis answers that its Function is not found (Redis restarted without
//! persistence, a node new to a Cluster, `FUNCTION FLUSH`), as a script is on `NOSCRIPT`;
//! replicas get it by replication. Libraries of earlier versions stay until `FUNCTION DELETE`.

use std::sync::atomic::Ordering;

use redis::aio::MultiplexedConnection;
use redis::{Arg, Cmd, ErrorKind, RedisError, Script, ServerErrorKind, Value};

use super::link::RedisCounters;

/// The lines of a script of `lua/` that end its configured part and begin what runs at every
/// call with a lone call's answer (see the module's doc).
pub const CONFIGURED_HERE: &str =
    "-- (a Function's configured part ends here)\nlocal lone_answer = lone_consume()\n";

/// What stands for [`CONFIGURED_HERE`] in a Function's whole script: the lone call's answer is
/// its argument (nil or false: the lone call was not answered), and not asked again.
const ANSWERED_HERE: &str = "-- (a Function's configured part ends here: lone_answer is given)\n";

/// How many configurations a Function keeps built, per script.
const CONFIGURATIONS_KEPT: usize = 16;

/// What ends the name of a Function's compact entry (see [`LuaScript::compact_request`]).
const COMPACT_SUFFIX: &str = "_compact";

/// A script of `lua/`, ready to run in Redis.
pub struct LuaScript {
    eval: Script,
    function: Option<LuaFunction>,
}

struct LuaFunction {
    name: String,
    /// The name of its compact entry (see [`LuaScript::compact_request`]).
    compact_name: String,
    library: String,
}

impl LuaScript {
    /// `source` is the script as Redis runs it (prelude included), named `name` (`token_bucket`).
    pub fn new(name: &str, source: &str) -> Self {
        let function = source.split_once(CONFIGURED_HERE).map(|(configured, _)| {
            let whole = source.replacen(CONFIGURED_HERE, ANSWERED_HERE, 1);
            // The hash of the code without its name (a Script's is its SHA-1).
            let code = Script::new(&function_library("NAME", configured, &whole));
            let name = format!("ratekeeper_{name}_{}", &code.get_hash()[..12]);
            LuaFunction {
                library: function_library(&name, configured, &whole),
                compact_name: format!("{name}{COMPACT_SUFFIX}"),
                name,
            }
        });
        Self {
            eval: Script::new(source),
            function,
        }
    }

    /// The command that runs the script (its arguments to follow: the number of keys, the keys,
    /// then `ARGV`): `FCALL` of its Function, unless the script has none or the store sends
    /// `EVALSHA` (`counters`: the `functions` option is `false`, or Redis refused Functions).
    pub fn command(&self, counters: &RedisCounters) -> Cmd {
        match &self.function {
            Some(function) if !counters.eval_only.load(Ordering::Relaxed) => {
                let mut cmd = redis::cmd("FCALL");
                cmd.arg(&function.name);
                cmd
            }
            _ => {
                let mut cmd = redis::cmd("EVALSHA");
                cmd.arg(self.eval.get_hash());
                cmd
            }
        }
    }

    /// The request (`FCALL`, as Redis reads it) of one call (its `keys` and `args`, see
    /// [`super::batch::call_arguments`]) by the Function's compact entry, given its
    /// `configuration` ([`compact_configuration`]): the configuration and the batch's shape as
    /// one argument, which the library splits once per configuration. Redis makes an object of
    /// each argument of a command, and a Lua string of each one for the Function, at every call:
    /// one for the configuration instead of several saves Redis about 2 µs per call for the
    /// token bucket's eight (benchmark/RESULTS.md, item 43). Written here, not through a
    /// `redis::Cmd`, which would copy each argument twice more (item 46). `None` when the call
    /// must go by [`Self::command`]: the script has no Function, or the store sends `EVALSHA`.
    pub fn compact_request(
        &self,
        counters: &RedisCounters,
        configuration: &str,
        keys: &[String],
        args: &[String],
    ) -> Option<Vec<u8>> {
        let function = self.function.as_ref()?;
        if counters.eval_only.load(Ordering::Relaxed) {
            return None;
        }
        let name = function.compact_name.as_bytes();
        let count = keys.len();
        let mut request = Vec::with_capacity(
            64 + name.len()
                + configuration.len()
                + keys.iter().chain(args).map(|a| a.len() + 16).sum::<usize>(),
        );
        request.push(b'*');
        write_decimal(&mut request, 4 + count + args.len());
        request.extend_from_slice(b"\r\n$5\r\nFCALL\r\n");
        write_bulk(&mut request, name);
        write_bulk(&mut request, decimal(count, &mut [0; 20]));
        for key in keys {
            write_bulk(&mut request, key.as_bytes());
        }
        write_bulk(&mut request, configuration.as_bytes());
        for arg in args {
            write_bulk(&mut request, arg.as_bytes());
        }
        Some(request)
    }

    /// The script's Function, if it has one: its name and its library's code.
    #[cfg(test)]
    fn function(&self) -> Option<(&str, &str)> {
        self.function
            .as_ref()
            .map(|function| (function.name.as_str(), function.library.as_str()))
    }

    /// `cmd` (a [`Self::command`]) as `EVALSHA`, with the same keys and arguments.
    fn as_eval(&self, cmd: &Cmd) -> Cmd {
        let mut eval = redis::cmd("EVALSHA");
        eval.arg(self.eval.get_hash());
        for arg in cmd.args_iter().skip(2) {
            if let Arg::Simple(bytes) = arg {
                eval.arg(bytes);
            }
        }
        eval
    }

    /// Loads the script's Function library (already there is fine).
    async fn load_function(
        &self,
        connection: &mut MultiplexedConnection,
    ) -> Result<(), RedisError> {
        let Some(function) = &self.function else {
            return Ok(());
        };
        match redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg(&function.library)
            .query_async::<Value>(connection)
            .await
        {
            Err(error) if error.detail().is_some_and(|d| d.contains("already exists")) => Ok(()),
            result => result.map(drop),
        }
    }
}

/// The code of the Function library `name` of a script whose configured part is `configured` and
/// whose whole code (prelude included) is `whole`, which takes the lone call's answer as its
/// third argument (see [`ANSWERED_HERE`]).
fn function_library(name: &str, configured: &str, whole: &str) -> String {
    format!(
        "#!lua name={name}\n\
         -- Made by src/store/script.rs from a script of lua/: read them there.\n\
         local KEYS, ARGV\n\
         local function whole_script(KEYS, ARGV, lone_answer)\n{whole}\nend\n\
         local function configure()\n{configured}\nreturn lone_consume, configuration_args\nend\n\
         -- Built configurations, the last used first: {{ lone = lone_consume, count = n, ARGV[1] \
         to ARGV[n] }}.\n\
         local built = {{}}\n\
         local function lone_of(args)\n\
         \x20 for b = 1, #built do\n\
         \x20   local entry, same = built[b], true\n\
         \x20   for i = 1, entry.count do\n\
         \x20     if args[i] ~= entry[i] then\n\
         \x20       same = false\n\
         \x20       break\n\
         \x20     end\n\
         \x20   end\n\
         \x20   if same then\n\
         \x20     if b > 1 then\n\
         \x20       table.remove(built, b)\n\
         \x20       table.insert(built, 1, entry)\n\
         \x20     end\n\
         \x20     return entry.lone\n\
         \x20   end\n\
         \x20 end\n\
         \x20 local lone, count = configure()\n\
         \x20 local entry = {{ lone = lone, count = count }}\n\
         \x20 for i = 1, count do\n\
         \x20   entry[i] = args[i]\n\
         \x20 end\n\
         \x20 table.insert(built, 1, entry)\n\
         \x20 built[{keep}] = nil\n\
         \x20 return lone\n\
         end\n\
         redis.register_function('{name}', function(keys, args)\n\
         \x20 KEYS, ARGV = keys, args\n\
         \x20 local answer = lone_of(args)()\n\
         \x20 if answer then\n\
         \x20   return answer\n\
         \x20 end\n\
         \x20 return whole_script(keys, args, answer)\n\
         end)\n\
         -- The compact entry (see LuaScript::compact_request): args[1] is ARGV up to the batch's \
         shape, joined by newlines,\n\
         -- the rest follows it. Each configuration's ARGV is built once and kept, its tail \
         rewritten at each call:\n\
         -- {{ argv, count = n, tail = #argv, lone }}.\n\
         local compact, compact_count = {{}}, 0\n\
         local function split(text)\n\
         \x20 local values, from = {{}}, 1\n\
         \x20 while true do\n\
         \x20   local at = string.find(text, '\\n', from, true)\n\
         \x20   if not at then\n\
         \x20     values[#values + 1] = string.sub(text, from)\n\
         \x20     return values\n\
         \x20   end\n\
         \x20   values[#values + 1] = string.sub(text, from, at - 1)\n\
         \x20   from = at + 1\n\
         \x20 end\n\
         end\n\
         redis.register_function('{name}{COMPACT_SUFFIX}', function(keys, args)\n\
         \x20 local entry = compact[args[1]]\n\
         \x20 if not entry then\n\
         \x20   if compact_count == {kept} then\n\
         \x20     compact, compact_count = {{}}, 0\n\
         \x20   end\n\
         \x20   local argv = split(args[1])\n\
         \x20   ARGV = argv\n\
         \x20   entry = {{ argv = argv, count = #argv, tail = #argv, lone = lone_of(argv) }}\n\
         \x20   compact[args[1]], compact_count = entry, compact_count + 1\n\
         \x20 end\n\
         \x20 local argv, count, length = entry.argv, entry.count, #args\n\
         \x20 for i = 2, length do\n\
         \x20   argv[count + i - 1] = args[i]\n\
         \x20 end\n\
         \x20 for i = count + length, entry.tail do\n\
         \x20   argv[i] = nil\n\
         \x20 end\n\
         \x20 entry.tail = count + length - 1\n\
         \x20 KEYS, ARGV = keys, argv\n\
         \x20 local answer = entry.lone()\n\
         \x20 if answer then\n\
         \x20   return answer\n\
         \x20 end\n\
         \x20 return whole_script(keys, argv, answer)\n\
         end)\n",
        keep = CONFIGURATIONS_KEPT + 1,
        kept = CONFIGURATIONS_KEPT,
    )
}

/// The configuration of a Function's compact entry (see [`LuaScript::compact_request`]): `shared`
/// (`ARGV`'s leading arguments) and the batch's shape of one call (`+`), joined by newlines;
/// `None` when they cannot be joined (no values, or one holding a newline).
pub fn compact_configuration(shared: &[String]) -> Option<String> {
    if shared.is_empty() || shared.iter().any(|value| value.contains('\n')) {
        return None;
    }
    let mut configuration = shared.join("\n");
    configuration.push_str("\n+");
    Some(configuration)
}

/// Appends `bytes` to `request` as a RESP bulk string.
fn write_bulk(request: &mut Vec<u8>, bytes: &[u8]) {
    request.push(b'$');
    write_decimal(request, bytes.len());
    request.extend_from_slice(b"\r\n");
    request.extend_from_slice(bytes);
    request.extend_from_slice(b"\r\n");
}

/// Appends `value` in decimal digits to `request`.
fn write_decimal(request: &mut Vec<u8>, value: usize) {
    request.extend_from_slice(decimal(value, &mut [0; 20]));
}

/// `value`'s decimal digits, written at the end of `digits`.
fn decimal(mut value: usize, digits: &mut [u8; 20]) -> &[u8] {
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (value % 10) as u8;
        value /= 10;
        if value == 0 {
            break;
        }
    }
    &digits[at..]
}

/// Whether `error` says that a Function is not loaded on the node.
fn function_not_found(error: &RedisError) -> bool {
    error.code() == Some("ERR")
        && error
            .detail()
            .is_some_and(|d| d.starts_with("Function not found"))
}

/// Whether `error` says that the node, or the user, does not run Functions: `FCALL` or
/// `FUNCTION` unknown (Redis 6.2) or not permitted (an ACL).
fn refuses_functions(error: &RedisError) -> bool {
    // Redis 6.2 quotes the command `so`, later versions 'so'.
    let detail = error
        .detail()
        .unwrap_or_default()
        .to_ascii_lowercase()
        .replace('`', "'");
    let names_functions = detail.contains("'fcall'") || detail.contains("'function");
    match error.code() {
        Some("ERR") => detail.starts_with("unknown command") && names_functions,
        Some("NOPERM") => names_functions,
        _ => false,
    }
}

/// Runs `cmd` (`ASKING` first when `asking`), a [`LuaScript::command`] of `script` when given:
/// then, when Redis does not have the script or its Function (`NOSCRIPT`, "Function not
/// found": after a restart or a failover), loads it and runs the call again; when Redis refuses
/// Functions, notes it in `counters` (the store then sends `EVALSHA`) and runs the call as
/// `EVALSHA`, as it does a call refused at `maxmemory` (see [`is_functions_oom`]).
pub async fn query_script(
    connection: &mut MultiplexedConnection,
    cmd: &Cmd,
    script: Option<&LuaScript>,
    asking: bool,
    counters: &RedisCounters,
) -> Result<Value, RedisError> {
    let result = send(connection, cmd, asking).await;
    let Some(script) = script else {
        return result;
    };
    match result {
        Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            eval_again(connection, cmd, script, asking, counters).await
        }
        Err(error) if function_not_found(&error) => {
            counters.count(&counters.script_loads);
            match script.load_function(connection).await {
                Ok(()) => send(connection, cmd, asking).await,
                // (At `maxmemory`, Redis refuses to load a library: this call goes as a script.)
                Err(error) if refuses_functions(&error) || error.code() == Some("OOM") => {
                    let refused = refuses_functions(&error);
                    send_as_eval(connection, cmd, script, asking, counters, refused).await
                }
                Err(error) => Err(error),
            }
        }
        Err(error) if refuses_functions(&error) || is_functions_oom(cmd, &error) => {
            let refused = refuses_functions(&error);
            send_as_eval(connection, cmd, script, asking, counters, refused).await
        }
        result => result,
    }
}

/// Whether `cmd` is an `FCALL` that Redis refused to run because it is at `maxmemory`: it refuses
/// a Function that may write before it runs, even one that would only read, where an `EVALSHA`
/// runs and is refused its first write. Sent again as `EVALSHA`, the call answers as a script's:
/// a read, or a refusal, answers; a write fails with Redis's `OOM` error, nothing written.
fn is_functions_oom(cmd: &Cmd, error: &RedisError) -> bool {
    error.code() == Some("OOM") && matches!(cmd.args_iter().next(), Some(Arg::Simple(b"FCALL")))
}

/// From now on the store sends `EVALSHA`.
fn refuse_functions(counters: &RedisCounters) {
    counters.eval_only.store(true, Ordering::Relaxed);
}

/// Sends `cmd`, an `FCALL` of `script`, as its `EVALSHA` (loading the script on `NOSCRIPT`):
/// from now on when `refused` (Redis or the user refuses Functions), for this call alone
/// otherwise (Redis refused it, or refused to load its library, at `maxmemory`).
async fn send_as_eval(
    connection: &mut MultiplexedConnection,
    cmd: &Cmd,
    script: &LuaScript,
    asking: bool,
    counters: &RedisCounters,
    refused: bool,
) -> Result<Value, RedisError> {
    if refused {
        refuse_functions(counters);
    }
    let eval = script.as_eval(cmd);
    match send(connection, &eval, asking).await {
        Err(error) if error.kind() == ErrorKind::Server(ServerErrorKind::NoScript) => {
            eval_again(connection, &eval, script, asking, counters).await
        }
        result => result,
    }
}

/// Loads the script (after `NOSCRIPT`) and sends `eval`, an `EVALSHA` of it, again.
async fn eval_again(
    connection: &mut MultiplexedConnection,
    eval: &Cmd,
    script: &LuaScript,
    asking: bool,
    counters: &RedisCounters,
) -> Result<Value, RedisError> {
    counters.count(&counters.script_loads);
    script.eval.load_async(connection).await?;
    send(connection, eval, asking).await
}

async fn send(
    connection: &mut MultiplexedConnection,
    cmd: &Cmd,
    asking: bool,
) -> Result<Value, RedisError> {
    if !asking {
        return cmd.query_async(connection).await;
    }
    let mut pipe = redis::pipe();
    pipe.cmd("ASKING").ignore().add_command(cmd.clone());
    let (value,): (Value,) = pipe.query_async(connection).await?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_script_without_its_configured_part_has_no_function() {
        let script = LuaScript::new("plain", "return 1\n");
        assert!(script.function().is_none());
        let counters = RedisCounters::default();
        let cmd = script.command(&counters);
        assert_eq!(
            cmd.args_iter()
                .next()
                .map(|a| matches!(a, Arg::Simple(b"EVALSHA"))),
            Some(true)
        );
    }

    /// A script with a configured part (so it has a Function), that returns 1.
    fn configured_source() -> String {
        format!(
            "local configuration_args = 1\nlocal function lone_consume() end\n{CONFIGURED_HERE}return 1\n"
        )
    }

    #[test]
    fn a_function_is_named_by_its_script_and_code() {
        let source = configured_source();
        let script = LuaScript::new("token_bucket", &source);
        let (name, library) = script.function().expect("a Function");
        assert!(name.starts_with("ratekeeper_token_bucket_"), "{name}");
        assert_eq!(name.len(), "ratekeeper_token_bucket_".len() + 12);
        assert!(library.starts_with(&format!("#!lua name={name}\n")));
        assert!(library.contains(&format!("redis.register_function('{name}'")));
        let other = LuaScript::new("token_bucket", &source.replace("return 1", "return 2"));
        assert_ne!(
            other.function().map(|f| f.0.to_string()),
            Some(name.to_string())
        );
    }

    #[test]
    fn a_lone_call_sends_its_configuration_as_one_argument_to_the_compact_entry() {
        let script = LuaScript::new("gcra", &configured_source());
        let (name, library) = script.function().expect("a Function");
        assert!(library.contains(&format!("redis.register_function('{name}_compact'")));
        let counters = RedisCounters::default();
        let strings = |values: &[&str]| values.iter().map(|v| v.to_string()).collect::<Vec<_>>();
        let (shared, keys, args) = (
            strings(&["600000", "consume"]),
            strings(&["k", "key two"]),
            strings(&["2", "", "1", "12345678901"]),
        );
        let configuration = compact_configuration(&shared).expect("a configuration");
        assert_eq!(configuration, "600000\nconsume\n+");
        let request = script
            .compact_request(&counters, &configuration, &keys, &args)
            .expect("a compact FCALL");
        // As redis-rs packs the same command.
        let expected = redis::cmd("FCALL")
            .arg(format!("{name}_compact"))
            .arg(2)
            .arg(&keys)
            .arg(&configuration)
            .arg(&args)
            .get_packed_command();
        assert_eq!(
            String::from_utf8_lossy(&request),
            String::from_utf8_lossy(&expected)
        );
        // Not joined: nothing to join, a value holding a newline. Not compact: EVALSHA, a script
        // without a Function.
        assert_eq!(compact_configuration(&[]), None);
        assert_eq!(
            compact_configuration(&strings(&["600000", "con\nsume"])),
            None
        );
        counters.eval_only.store(true, Ordering::Relaxed);
        assert!(script
            .compact_request(&counters, &configuration, &keys, &args)
            .is_none());
        let plain = LuaScript::new("plain", "return 1\n");
        assert!(plain
            .compact_request(&RedisCounters::default(), &configuration, &keys, &args)
            .is_none());
    }

    #[test]
    fn writes_decimals_as_redis_reads_them() {
        for value in [0, 7, 10, 99, 100, 65_535, usize::MAX] {
            let mut written = Vec::new();
            write_decimal(&mut written, value);
            assert_eq!(written, value.to_string().into_bytes());
        }
    }

    fn error(reply: &str) -> RedisError {
        redis::parse_redis_value(format!("-{reply}\r\n").as_bytes())
            .and_then(Value::extract_error)
            .expect_err("an error reply")
    }

    #[test]
    fn errors_that_refuse_functions_are_told_apart() {
        // Redis 6.2; Redis 7 with a user without FCALL, or without FUNCTION.
        assert!(refuses_functions(&error(
            "ERR unknown command `FCALL`, with args beginning with: `ratekeeper_x`, `1`, "
        )));
        assert!(refuses_functions(&error(
            "ERR unknown command 'FCALL', with args beginning with: 'x' '1' "
        )));
        assert!(refuses_functions(&error(
            "NOPERM this user has no permissions to run the 'fcall' command"
        )));
        assert!(refuses_functions(&error(
            "NOPERM this user has no permissions to run the 'function|load' command"
        )));
        // A command of the script refused, a key's ACL, an unknown command of another name.
        assert!(!refuses_functions(&error(
            "NOPERM this user has no permissions to access one of the keys used as arguments"
        )));
        assert!(!refuses_functions(&error(
            "ERR unknown command 'FOO', with args beginning with: "
        )));
        assert!(!refuses_functions(&error(
            "NOSCRIPT No matching script. Please use EVAL."
        )));
        assert!(function_not_found(&error("ERR Function not found")));
        assert!(!function_not_found(&error("ERR Error running script")));
    }
}
