//! `RedisStore`: a shared connection to Redis that limiters run their scripts on.

use std::sync::Arc;

use napi::bindgen_prelude::{
    BufferSlice, FnArgs, FromNapiValue, Function, JsObjectValue, PromiseRaw, Unknown,
};
use napi::threadsafe_function::ThreadsafeFunctionCallMode;
use napi::JsValue;
use napi::{Env, ValueType};
use napi_derive::napi;

use super::options::{read, string_value, OptionsReader};
use super::{js_error, rejected};
use crate::error::{ErrorCode, Failure, Outcome};
use crate::store::link::{RedisCounters, StoreEvent};
use crate::store::redis::RedisStore;
use crate::store::redis_config::{RedisConfig, RedisSettings, TlsSettings, DEFAULT_SENTINEL_PORT};

/// How to reach Redis. Every field is optional; a plain string is taken as `url`.
///
/// ```js
/// new RedisStore({ host: 'redis.internal', port: 6380, password: process.env.REDIS_PASSWORD })
/// new RedisStore('rediss://user:secret@redis.internal:6380/2')
/// new RedisStore({ cluster: ['redis://10.0.0.1:7000', 'redis://10.0.0.2:7000'] })
/// new RedisStore({ sentinels: [{ host: '10.0.0.1', port: 26379 }, { host: '10.0.0.2', port: 26379 }], name: 'mymaster', password })
/// new RedisStore('redis+sentinel://:secret@10.0.0.1:26379,10.0.0.2:26379/mymaster')
/// ```
#[napi(object)]
pub struct RedisOptions {
    /// `redis://[user[:password]@]host[:port][/db]`, `rediss://` for TLS,
    /// `redis+unix:///path/to/socket`, or through Sentinel
    /// `redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/name[/db]` (the
    /// sentinels' addresses, port `26379` by default; the master name; the credentials and
    /// database of the data nodes; `rediss+sentinel://` for TLS to the data nodes). Default:
    /// from `host` and `port`.
    pub url: Option<String>,
    /// A unix socket's path, as ioredis and node-redis name it (the same as a
    /// `redis+unix:///path/to/socket` URL); not with `url`, `host`, `port`, `cluster`,
    /// `sentinels` or `tls`. Default: none (TCP).
    ///
    /// ```js
    /// new RedisStore({ path: '/run/redis/redis.sock', password })
    /// ```
    pub path: Option<String>,
    /// Default `'127.0.0.1'`.
    pub host: Option<String>,
    /// Default `6379`.
    pub port: Option<u32>,
    /// ACL user name (Redis 6+). Default: none.
    pub username: Option<String>,
    /// Default: none. It never appears in error messages.
    pub password: Option<String>,
    /// Database number. Default `0`.
    pub db: Option<u32>,
    /// Connect with TLS: `true`, or Node's TLS options for a private CA, a client certificate
    /// or another server name (implying `true`). Default `false` (or `true` with a `rediss://`
    /// URL).
    ///
    /// ```js
    /// new RedisStore({ url: 'rediss://10.0.0.5:6380', tls: { ca: fs.readFileSync('ca.pem'), servername: 'redis.internal' } })
    /// ```
    #[napi(ts_type = "boolean | RedisTlsOptions")]
    pub tls: Option<bool>,
    /// URLs of one or more Redis Cluster nodes; the rest are discovered. Default: not a cluster.
    pub cluster: Option<Vec<String>>,
    /// Redis Sentinel: the sentinels that monitor `name` (one or more; the store asks them for
    /// the primary, confirms it with `ROLE`, and follows failovers). Not with `url`, `host`,
    /// `port`, `path` or `cluster`. `username`, `password`, `db`, `tls` and the timeouts are
    /// those of the data nodes; the sentinels are reached without TLS. Default: no Sentinel.
    ///
    /// ```js
    /// new RedisStore({ sentinels: [{ host: '10.0.0.1', port: 26379 }, { host: '10.0.0.2' }], name: 'mymaster' })
    /// ```
    pub sentinels: Option<Vec<SentinelAddress>>,
    /// The master name the sentinels monitor (their `sentinel monitor <name> ...`); required
    /// with `sentinels`. Example: `'mymaster'`.
    pub name: Option<String>,
    /// The ACL user to log in to the sentinels as (a user of the sentinels' own ACL, not the
    /// data nodes'). Default: none (the default user).
    ///
    /// ```js
    /// new RedisStore({ sentinels, name: 'mymaster', sentinelUsername: 'watcher', sentinelPassword, password })
    /// ```
    pub sentinel_username: Option<String>,
    /// The password of the sentinels (their `requirepass`, or `sentinelUsername`'s); `password`
    /// is the data nodes'. Default: none. It never appears in error messages.
    pub sentinel_password: Option<String>,
    /// How long opening a connection may take, in milliseconds. Default `1000`.
    pub connect_timeout_ms: Option<f64>,
    /// How long a call may wait for Redis before it rejects with `ERR_STORE_UNAVAILABLE`, in
    /// milliseconds. Default `1000`.
    pub command_timeout_ms: Option<f64>,
    /// Run the scripts as Redis Functions (`FCALL`) where Redis allows it (Redis 7 and later,
    /// Valkey): Redis then keeps a script's functions and its parsed configuration from one call
    /// to the next, where `EVALSHA` makes them again at every call (a lone call costs Redis
    /// 1.5 to 2.3 µs less). The store loads its libraries itself (named
    /// `ratekeeper_<script>_<hash>`, see `FUNCTION LIST`), and sends `EVALSHA` by itself to a
    /// server without Functions (Redis 6.2) or as a user not allowed `FCALL` or `FUNCTION LOAD`.
    /// `false` always sends `EVALSHA`: behind a proxy that does not pass `FCALL`, or to keep
    /// libraries out of the server. Answers are the same either way. Default `true`.
    ///
    /// ```js
    /// new RedisStore({ url: 'redis://proxy.internal:6379', functions: false })
    /// ```
    pub functions: Option<bool>,
}

/// One sentinel's address, as ioredis names it.
///
/// ```js
/// { host: '10.0.0.1', port: 26379 }
/// ```
#[napi(object)]
pub struct SentinelAddress {
    /// The sentinel's host name or IP address.
    pub host: String,
    /// Default `26379`.
    pub port: Option<u32>,
}

/// TLS options, named as Node's `tls.connect` names them (ioredis passes the same).
#[napi(object)]
pub struct RedisTlsOptions {
    /// Certificates (PEM, as strings or Buffers) to trust instead of the system's: a private
    /// CA. Default: the system's.
    #[napi(ts_type = "string | Uint8Array | Array<string | Uint8Array>")]
    pub ca: Option<String>,
    /// A client certificate (PEM), for a server with `tls-auth-clients yes`. Default: none.
    #[napi(ts_type = "string | Uint8Array")]
    pub cert: Option<String>,
    /// The client certificate's private key (PEM). Default: none.
    #[napi(ts_type = "string | Uint8Array")]
    pub key: Option<String>,
    /// The name the server's certificate must carry, when it is not the host connected to
    /// (single node only). Default: the host.
    pub servername: Option<String>,
    /// `false` accepts any certificate: for tests only. Default `true`.
    pub reject_unauthorized: Option<bool>,
}

/// A connection to Redis (a single node or a Cluster), shared by every limiter built on it.
///
/// The connection is multiplexed: concurrent calls are pipelined on one socket. A limiter's calls
/// made in one turn of the event loop leave together once the turn ends (as ioredis's
/// auto-pipelining), in one script call (32 at a time when a turn makes many; on a Cluster each
/// call leaves alone, at once). It opens on first use and reopens by itself when Redis comes back
/// after an outage; calls made while Redis is unreachable reject with `ERR_STORE_UNAVAILABLE`
/// within `commandTimeoutMs` of leaving.
///
/// A lone call (nothing else of the process waiting for Redis: one request at a time, a cron
/// job) goes by a second connection, the direct lane, written and read by the JavaScript thread
/// itself, which saves it two hand-offs between threads. It opens after the first lone call,
/// logs in as the store's connection does, and never keeps the process alive. A single node and
/// the primary found through Sentinel have one, over plain TCP or a unix socket; with TLS, and on
/// a Cluster, every call takes the shared connections.
///
/// ```js
/// const store = await RedisStore.connect('redis://127.0.0.1:6379')
/// const limiter = new RedisRateLimiter({ client: store, namespace: 'login:', interval: 60_000, maxInInterval: 5 })
/// // ...
/// await store.close()
/// ```
#[napi(js_name = "RedisStore")]
pub struct JsRedisStore {
    pub(crate) inner: Arc<RedisStore>,
}

#[napi]
impl JsRedisStore {
    /// Creates a store without connecting: the first call opens the connection.
    /// Throws `ERR_INVALID_OPTION` (`TypeError`/`RangeError`) for bad options.
    #[napi(
        constructor,
        catch_unwind,
        ts_args_type = "options?: string | RedisOptions"
    )]
    pub fn new(env: Env, options: Option<Unknown>) -> napi::Result<Self> {
        Self::build(options).map_err(|failure| js_error(&env, failure))
    }

    /// Creates a store and opens its connection; rejects with `ERR_STORE_UNAVAILABLE` when Redis
    /// cannot be reached within `connectTimeoutMs` and `commandTimeoutMs`.
    ///
    /// ```js
    /// const store = await RedisStore.connect({ host: '127.0.0.1', port: 6379 })
    /// ```
    #[napi(
        catch_unwind,
        ts_args_type = "options?: string | RedisOptions",
        ts_return_type = "Promise<RedisStore>"
    )]
    pub fn connect<'env>(
        env: &'env Env,
        options: Option<Unknown>,
    ) -> napi::Result<PromiseRaw<'env, JsRedisStore>> {
        let store = match Self::build(options) {
            Ok(store) => store,
            Err(failure) => return rejected(env, failure),
        };
        let inner = store.inner.clone();
        // The connection's tasks must live on our runtime, where the calls run.
        let connecting = super::dispatch::runtime().spawn(async move { inner.connect().await });
        env.spawn_future_with_callback(
            async move {
                Ok(connecting.await.unwrap_or_else(|_| {
                    Err(Failure::error(
                        ErrorCode::Internal,
                        "connecting panicked; please report this bug",
                    ))
                }))
            },
            move |env, outcome| match outcome {
                Ok(()) => Ok(store),
                Err(failure) => Err(js_error(env, failure)),
            },
        )
    }

    /// Closes the connection. Calls made afterwards reject with `ERR_STORE_CLOSED`, and so do calls
    /// not sent yet: those made in the same turn of the event loop, which leave when it ends (await
    /// them before closing). Calls already sent finish.
    #[napi(catch_unwind, ts_return_type = "Promise<void>")]
    pub fn close<'env>(&self, env: &'env Env) -> napi::Result<PromiseRaw<'env, ()>> {
        self.inner.close();
        PromiseRaw::resolve(env, ())
    }

    /// `true` once `close()` was called.
    #[napi(getter, catch_unwind)]
    pub fn closed(&self) -> bool {
        self.inner.is_closed()
    }

    /// `true` when the store speaks Redis Cluster.
    #[napi(getter, catch_unwind)]
    pub fn is_cluster(&self) -> bool {
        self.inner.config().is_cluster()
    }

    /// `true` when the store finds its primary through Redis Sentinel.
    #[napi(getter, catch_unwind)]
    pub fn is_sentinel(&self) -> bool {
        self.inner.config().is_sentinel()
    }

    /// What the store has done since it was made: calls, failures by code, connections opened
    /// and reopened, scripts loaded again (after a restart or failover), and script calls sent
    /// (a batch carries many calls).
    ///
    /// ```js
    /// setInterval(() => metrics.gauge('ratekeeper', store.stats()), 10_000)
    /// ```
    #[napi(catch_unwind)]
    pub fn stats(&self) -> RedisStoreStats {
        let c = self.inner.counters();
        let get = |counter| RedisCounters::get(counter) as f64;
        let batches = get(&c.batches);
        RedisStoreStats {
            calls: get(&c.calls),
            failures: StoreFailures {
                unavailable: get(&c.unavailable),
                error: get(&c.errors),
                closed: get(&c.closed),
            },
            connections: get(&c.connections),
            reconnects: get(&c.reconnects),
            script_loads: get(&c.script_loads),
            batches,
            mean_batch_size: if batches > 0.0 {
                get(&c.batched_calls) / batches
            } else {
                0.0
            },
        }
    }

    /// Hands the store's events to `listener`, on the JS thread: `('error', node, message)`
    /// once when a node's connection is lost (or cannot be opened), `('reconnect', node, '')`
    /// once when it is back. It replaces the previous listener and does not keep the process
    /// alive. Use `store.on('error' | 'reconnect', ...)`, which is built on it.
    #[napi(
        catch_unwind,
        ts_args_type = "listener: (type: 'error' | 'reconnect', node: string, message: string) => void"
    )]
    pub fn set_event_listener(
        &self,
        listener: Function<FnArgs<(&'static str, String, String)>, ()>,
    ) -> napi::Result<()> {
        let listener = listener
            .build_threadsafe_function::<FnArgs<(&'static str, String, String)>>()
            .weak::<true>()
            .callee_handled::<false>()
            .build()?;
        self.inner
            .counters()
            .listen(Box::new(move |event: StoreEvent| {
                let args = match event {
                    StoreEvent::Lost { node, message } => ("error", node, message),
                    StoreEvent::Reconnected { node } => ("reconnect", node, String::new()),
                };
                listener.call(args.into(), ThreadsafeFunctionCallMode::NonBlocking);
            }));
        Ok(())
    }

    fn build(options: Option<Unknown>) -> Outcome<Self> {
        let settings = redis_settings(options)?;
        let config = RedisConfig::from_settings(settings)?;
        Ok(Self {
            inner: Arc::new(RedisStore::new(config)),
        })
    }
}

/// What a store has done, from `store.stats()`.
#[napi(object)]
pub struct RedisStoreStats {
    /// Calls made (each call of a batch counts).
    pub calls: f64,
    /// Calls that failed, by error code.
    pub failures: StoreFailures,
    /// Connections opened (one per node, more after failures).
    pub connections: f64,
    /// Connections opened again after a failure.
    pub reconnects: f64,
    /// Scripts, or their Function libraries, loaded because Redis did not have them (its first
    /// call of each; after a restart, a failover, `SCRIPT FLUSH` or `FUNCTION FLUSH`).
    pub script_loads: f64,
    /// Script calls sent to Redis: concurrent calls of a limiter leave together.
    pub batches: f64,
    /// Calls per script call sent, on average.
    pub mean_batch_size: f64,
}

/// Failed calls by error code.
#[napi(object)]
pub struct StoreFailures {
    #[napi(js_name = "ERR_STORE_UNAVAILABLE")]
    pub unavailable: f64,
    #[napi(js_name = "ERR_STORE_ERROR")]
    pub error: f64,
    #[napi(js_name = "ERR_STORE_CLOSED")]
    pub closed: f64,
}

/// Reads `string | RedisOptions`.
fn redis_settings(options: Option<Unknown>) -> Outcome<RedisSettings> {
    if let Some(url) = options.as_ref().and_then(string_value) {
        return Ok(RedisSettings {
            url: Some(url),
            ..RedisSettings::default()
        });
    }
    let options = options.filter(|v| v.get_type().ok() != Some(ValueType::Null));
    let mut r = OptionsReader::new(options, "Redis options", ErrorCode::InvalidOption, true)?;
    let settings = RedisSettings {
        url: r.string("url")?,
        path: r.string("path")?,
        host: r.string("host")?,
        port: whole(&mut r, "port", 1.0, 65535.0)?.map(|p| p as u16),
        username: r.string("username")?,
        password: r.string("password")?,
        db: whole(&mut r, "db", 0.0, 1e9)?.map(|db| db as i64),
        tls: None,
        tls_options: None,
        cluster: r.strings("cluster")?,
        sentinels: r.objects("sentinels", |s| {
            let host = s
                .string("host")?
                .ok_or_else(|| s.missing("host", "a string"))?;
            let port = whole(s, "port", 1.0, 65535.0)?.map_or(DEFAULT_SENTINEL_PORT, |p| p as u16);
            Ok((host, port))
        })?,
        name: r.string("name")?,
        sentinel_username: r.string("sentinelUsername")?,
        sentinel_password: r.string("sentinelPassword")?,
        connect_timeout_ms: r.number("connectTimeoutMs")?,
        command_timeout_ms: r.number("commandTimeoutMs")?,
        functions: r.boolean("functions")?,
    };
    let (tls, tls_options) = tls_option(&mut r)?;
    r.finish()?;
    Ok(RedisSettings {
        tls,
        tls_options,
        ..settings
    })
}

/// Reads `tls`: a boolean, or TLS options (which mean `true`).
fn tls_option(r: &mut OptionsReader) -> Outcome<(Option<bool>, Option<TlsSettings>)> {
    let Some(value) = r.raw("tls")? else {
        return Ok((None, None));
    };
    match value.get_type() {
        Ok(ValueType::Boolean) => return Ok((r.boolean("tls")?, None)),
        Ok(ValueType::Object) if !value.is_array().unwrap_or(true) => {}
        _ => return Err(r.wrong_type("tls", "a boolean or TLS options", &value)),
    }
    let mut t = OptionsReader::new(Some(value), "`tls`", r.code(), false)?;
    let settings = TlsSettings {
        ca: pem(&mut t, "ca")?,
        cert: pem(&mut t, "cert")?,
        key: pem(&mut t, "key")?,
        servername: t.string("servername")?,
        reject_unauthorized: t.boolean("rejectUnauthorized")?,
    };
    t.finish()?;
    Ok((Some(true), Some(settings)))
}

/// PEM text given as a string, a Buffer, or an array of them (joined).
fn pem(r: &mut OptionsReader, name: &'static str) -> Outcome<Option<Vec<u8>>> {
    let Some(value) = r.raw(name)? else {
        return Ok(None);
    };
    let wrong = |r: &OptionsReader| r.wrong_type(name, "PEM text (a string or a Buffer)", &value);
    if let Some(bytes) = pem_part(&value) {
        return Ok(Some(bytes));
    }
    if !value.is_array().unwrap_or(false) {
        return Err(wrong(r));
    }
    let array = value.coerce_to_object().map_err(|_| wrong(r))?;
    let mut joined = Vec::new();
    for i in 0..read(array.get_array_length())? {
        let item = read(array.get_element::<Unknown>(i))?;
        joined.extend(pem_part(&item).ok_or_else(|| wrong(r))?);
        joined.push(b'\n');
    }
    Ok(Some(joined))
}

fn pem_part(value: &Unknown) -> Option<Vec<u8>> {
    if let Some(text) = string_value(value) {
        return Some(text.into_bytes());
    }
    if !value.is_buffer().unwrap_or(false) {
        return None;
    }
    let raw = value.value();
    // SAFETY: a Buffer value of the current call's env.
    let buffer = unsafe { BufferSlice::from_napi_value(raw.env, raw.value) }.ok()?;
    Some(buffer.to_vec())
}

/// A whole-number option within `min..=max`.
fn whole(r: &mut OptionsReader, name: &'static str, min: f64, max: f64) -> Outcome<Option<f64>> {
    match r.number(name)? {
        Some(n) if n.fract() != 0.0 || n < min || n > max => Err(Failure::range_error(
            r.code(),
            format!("`{name}` must be a whole number from {min} to {max}, got {n}"),
        )),
        n => Ok(n),
    }
}
