//! The Redis store: one multiplexed connection (single node or Cluster) that runs the algorithms'
//! Lua scripts, each call bounded by a timeout.
//!
//! The connection is opened on first use and reopened by itself after Redis comes back, so a
//! limiter built while Redis is down starts working as soon as Redis is up. Every call either
//! answers or fails with `ERR_STORE_UNAVAILABLE` within `command_timeout`: it never hangs.
//! Scripts go out as EVALSHA and are loaded again when Redis answers NOSCRIPT (after a restart
//! or a failover), which redis-rs's `ScriptInvocation` does for us.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, RwLock};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{
    Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, FromRedisValue, IntoConnectionInfo, Pipeline,
    RedisError, RedisFuture, Script, ScriptInvocation, ServerErrorKind, Value,
};

use crate::error::{ErrorCode, Failure, Outcome};

/// Default for `connectTimeoutMs` and `commandTimeoutMs`.
pub const DEFAULT_TIMEOUT_MS: f64 = 1000.0;
/// The longest timeout accepted: ten minutes.
pub const MAX_TIMEOUT_MS: f64 = 600_000.0;

/// How to reach Redis, as the user gave it (every field optional).
#[derive(Debug, Clone, Default)]
pub struct RedisSettings {
    pub url: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: Option<i64>,
    pub tls: Option<bool>,
    /// URLs of some Cluster nodes: the store then speaks Redis Cluster.
    pub cluster: Option<Vec<String>>,
    pub connect_timeout_ms: Option<f64>,
    pub command_timeout_ms: Option<f64>,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    nodes: Vec<ConnectionInfo>,
    cluster: bool,
    connect_timeout: Duration,
    command_timeout: Duration,
    /// `host:port` of the first node, for error messages (never a password).
    endpoint: String,
}

impl RedisConfig {
    pub fn from_settings(settings: RedisSettings) -> Outcome<Self> {
        let connect_timeout = timeout_option("connectTimeoutMs", settings.connect_timeout_ms)?;
        let command_timeout = timeout_option("commandTimeoutMs", settings.command_timeout_ms)?;
        let cluster = settings.cluster.is_some();
        let nodes = match &settings.cluster {
            Some(urls) if urls.is_empty() => {
                return Err(invalid("`cluster` must list at least one node URL"));
            }
            Some(urls) => urls
                .iter()
                .map(|url| node_info(Some(url), &settings, "cluster"))
                .collect::<Outcome<Vec<_>>>()?,
            None => vec![node_info(settings.url.as_deref(), &settings, "url")?],
        };
        if cluster && settings.db.is_some_and(|db| db != 0) {
            return Err(invalid(
                "`db` must be 0 with `cluster`: Redis Cluster has one database",
            ));
        }
        let endpoint = endpoint_of(nodes[0].addr());
        Ok(Self {
            nodes,
            cluster,
            connect_timeout,
            command_timeout,
            endpoint,
        })
    }

    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure::range_error(ErrorCode::InvalidOption, message)
}

fn timeout_option(name: &str, ms: Option<f64>) -> Outcome<Duration> {
    let ms = ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if !ms.is_finite() || !(1.0..=MAX_TIMEOUT_MS).contains(&ms) {
        return Err(invalid(format!(
            "`{name}` must be a number of milliseconds from 1 to {MAX_TIMEOUT_MS}, got {ms}"
        )));
    }
    Ok(Duration::from_secs_f64(ms / 1000.0))
}

/// One node's connection info: its URL (or host and port), then the explicit options on top.
fn node_info(url: Option<&str>, s: &RedisSettings, url_option: &str) -> Outcome<ConnectionInfo> {
    let info = match url {
        // The URL itself is not echoed: it may hold a password.
        Some(url) => url.into_connection_info().map_err(|e| {
            invalid(format!(
                "`{url_option}` is not a valid Redis URL (redis://, rediss:// or redis+unix://): {}",
                e.kind_description()
            ))
        })?,
        None => {
            let host = s.host.clone().unwrap_or_else(|| "127.0.0.1".into());
            let port = s.port.unwrap_or(6379);
            (host.as_str(), port)
                .into_connection_info()
                .map_err(|e| invalid(format!("`host` is not valid: {}", e.kind_description())))?
        }
    };
    let mut redis = info.redis_settings().clone();
    if let Some(username) = &s.username {
        redis = redis.set_username(username);
    }
    if let Some(password) = &s.password {
        redis = redis.set_password(password);
    }
    if let Some(db) = s.db {
        redis = redis.set_db(db);
    }
    let mut info = info.set_redis_settings(redis);
    if s.tls == Some(true) {
        if let ConnectionAddr::Tcp(host, port) = info.addr().clone() {
            info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            });
        }
    }
    Ok(info)
}

fn endpoint_of(addr: &ConnectionAddr) -> String {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        ConnectionAddr::Unix(path) => path.display().to_string(),
        _ => "(unknown address)".to_owned(),
    }
}

trait KindDescription {
    fn kind_description(&self) -> String;
}

impl KindDescription for RedisError {
    fn kind_description(&self) -> String {
        // redis-rs's messages for parse failures name the problem, not the URL.
        self.detail()
            .map_or_else(|| format!("{:?}", self.kind()), str::to_owned)
    }
}

#[derive(Clone)]
enum Connection {
    Single(ConnectionManager),
    Cluster(ClusterConnection),
}

impl redis::aio::ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Connection::Single(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Connection::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Single(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

/// A sorted-set member that no other call anywhere uses, shaped like rolling-rate-limiter's
/// UUID v4 members: a random per-process prefix and a per-process counter.
pub fn unique_member() -> String {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::AtomicU64;
    static PREFIX: LazyLock<u64> = LazyLock::new(|| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.write_i64(crate::time::system_now());
        hasher.finish()
    });
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (prefix, count) = (*PREFIX, COUNTER.fetch_add(1, Ordering::Relaxed));
    format!(
        "{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}",
        prefix >> 32,
        (prefix >> 16) & 0xffff,
        (prefix >> 4) & 0xfff,
        count >> 48 & 0xfff,
        count & 0xffff_ffff_ffff
    )
}

/// A shared, lazily opened connection to Redis.
pub struct RedisStore {
    config: RedisConfig,
    connection: RwLock<Option<Connection>>,
    /// Held while a connection is being opened, so that concurrent callers open one, not many.
    opening: tokio::sync::Mutex<()>,
    closed: AtomicBool,
}

impl RedisStore {
    pub fn new(config: RedisConfig) -> Self {
        Self {
            config,
            connection: RwLock::new(None),
            opening: tokio::sync::Mutex::new(()),
            closed: AtomicBool::new(false),
        }
    }

    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// Opens the connection now (it is otherwise opened by the first call).
    pub async fn connect(&self) -> Outcome<()> {
        self.bounded(async { self.connection().await.map(drop) })
            .await
    }

    /// Runs a script (no timeout of its own: callers bound it).
    async fn run_script<T: FromRedisValue>(&self, invocation: &ScriptInvocation<'_>) -> Outcome<T> {
        let mut connection = self.connection().await?;
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|e| self.failure(e))
    }

    /// Runs a multi-key script (see [`ScriptBatcher`]) for `calls`; one answer per call, in
    /// order. No timeout of its own: callers bound it.
    async fn eval_batch(
        &self,
        script: &Script,
        shared: &[String],
        calls: &[(Vec<String>, Vec<String>)],
    ) -> Outcome<Vec<Outcome<Value>>> {
        let mut invocation = script.prepare_invoke();
        for (keys, _) in calls {
            invocation.key(keys);
        }
        invocation.arg(shared);
        for (_, args) in calls {
            invocation.arg(args);
        }
        let reply: Vec<Value> = self.run_script(&invocation).await?;
        if reply.len() != calls.len() {
            return Err(short_reply());
        }
        Ok(reply
            .into_iter()
            .map(|answer| match answer {
                // The script answers a call that failed alone with its error message.
                Value::BulkString(message) => Err(Failure::error(
                    ErrorCode::StoreError,
                    format!(
                        "Redis at {} answered with an error: {}",
                        self.config.endpoint,
                        String::from_utf8_lossy(&message)
                    ),
                )
                .with_cause("ResponseError", String::from_utf8_lossy(&message))),
                answer => Ok(answer),
            })
            .collect())
    }

    /// Deletes keys (of one slot, on a Cluster), within `commandTimeoutMs`.
    pub async fn delete(&self, keys: &[String]) -> Outcome<()> {
        self.bounded(async {
            let mut connection = self.connection().await?;
            Cmd::del(keys)
                .query_async(&mut connection)
                .await
                .map_err(|e| self.failure(e))
        })
        .await
    }

    /// Closes the connection. Calls made after this fail with `ERR_STORE_CLOSED`; calls under
    /// way finish on the connection they hold.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.connection
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take();
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    /// Runs `work` within `commandTimeoutMs`.
    async fn bounded<T>(&self, work: impl std::future::Future<Output = Outcome<T>>) -> Outcome<T> {
        self.bounded_for(self.config.command_timeout, work).await
    }

    async fn bounded_for<T>(
        &self,
        budget: Duration,
        work: impl std::future::Future<Output = Outcome<T>>,
    ) -> Outcome<T> {
        tokio::time::timeout(budget, work)
            .await
            .unwrap_or_else(|_| Err(self.timeout_failure()))
    }

    fn timeout_failure(&self) -> Failure {
        Failure::error(
            ErrorCode::StoreUnavailable,
            format!(
                "Redis at {} did not answer within {} ms",
                self.config.endpoint,
                self.config.command_timeout.as_millis()
            ),
        )
        .with_cause("Timeout", "the command timed out")
    }

    async fn connection(&self) -> Outcome<Connection> {
        if let Some(connection) = self.current() {
            return Ok(connection);
        }
        let _opening = self.opening.lock().await;
        if let Some(connection) = self.current() {
            return Ok(connection);
        }
        if self.is_closed() {
            return Err(Failure::error(
                ErrorCode::StoreClosed,
                "the Redis store was closed with close()",
            ));
        }
        let connection = self.open().await.map_err(|e| self.failure(e))?;
        *self
            .connection
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = Some(connection.clone());
        Ok(connection)
    }

    fn current(&self) -> Option<Connection> {
        self.connection
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    async fn open(&self) -> Result<Connection, RedisError> {
        let c = &self.config;
        if c.cluster {
            let first = c.nodes[0].redis_settings();
            let mut builder = ClusterClient::builder(c.nodes.clone())
                .connection_timeout(c.connect_timeout)
                .response_timeout(c.command_timeout)
                .retries(2);
            if let Some(username) = first.username() {
                builder = builder.username(username);
            }
            if let Some(password) = first.password() {
                builder = builder.password(password);
            }
            let client = builder.build()?;
            Ok(Connection::Cluster(client.get_async_connection().await?))
        } else {
            let client = redis::Client::open(c.nodes[0].clone())?;
            let manager_config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(c.connect_timeout))
                .set_response_timeout(Some(c.command_timeout))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_millis(500));
            let manager = ConnectionManager::new_with_config(client, manager_config).await?;
            Ok(Connection::Single(manager))
        }
    }

    /// Sorts a redis-rs error into "Redis is unavailable" or "Redis said no".
    fn failure(&self, error: RedisError) -> Failure {
        let unavailable = error.is_io_error()
            || error.is_timeout()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || error.is_cluster_error()
            || matches!(
                error.kind(),
                ErrorKind::ClusterConnectionNotFound
                    | ErrorKind::Server(ServerErrorKind::BusyLoading)
                    | ErrorKind::Server(ServerErrorKind::MasterDown)
            );
        let cause_code = format!("{:?}", error.kind());
        let cause_message = error.to_string();
        if unavailable {
            Failure::error(
                ErrorCode::StoreUnavailable,
                format!(
                    "Redis at {} is unavailable: {cause_message}",
                    self.config.endpoint
                ),
            )
        } else {
            Failure::error(
                ErrorCode::StoreError,
                format!(
                    "Redis at {} answered with an error: {cause_message}",
                    self.config.endpoint
                ),
            )
        }
        .with_cause(cause_code, cause_message)
    }
}

/// The Redis Cluster slot of a key: CRC16 (XMODEM) of its hash tag (the part between the first
/// `{` and the next `}`, when not empty) or of the whole key, modulo 16384.
pub fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let close = key[open + 1..].iter().position(|&b| b == b'}')?;
        (close > 0).then(|| &key[open + 1..open + 1 + close])
    });
    let mut crc: u16 = 0;
    for &byte in tagged.unwrap_or(key) {
        crc ^= u16::from(byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// On a Cluster, every key of one call must live in one slot: otherwise a clear error, naming
/// the fix (a shared hash tag).
pub fn check_one_slot(config: &RedisConfig, keys: &[String]) -> Outcome<()> {
    let Some((first, rest)) = keys.split_first() else {
        return Ok(());
    };
    let slot = key_slot(first.as_bytes());
    if config.is_cluster() && rest.iter().any(|key| key_slot(key.as_bytes()) != slot) {
        return Err(Failure::range_error(
            ErrorCode::InvalidId,
            "on a Redis Cluster, the ids of one call must share a hash tag so that their keys \
             live on one node: e.g. '{user:42}ip:10.0.0.1' and '{user:42}user:42'",
        ));
    }
    Ok(())
}

/// The most calls one EVALSHA carries.
const MAX_BATCH: usize = 256;

/// Batches of one batcher in flight at once: two, so that Redis runs one while the next fills.
const BATCHES_IN_FLIGHT: usize = 2;

/// What to do with a call's answer; it runs on the runtime's thread.
pub type Answered = Box<dyn FnOnce(Outcome<Value>) + Send>;

/// Sends the calls of one script that share their leading arguments together: one EVALSHA with
/// the keys and arguments of every call waiting, at most [`MAX_BATCH`] calls.
///
/// At most [`BATCHES_IN_FLIGHT`] batches are in flight: meanwhile new calls queue up and leave
/// together in the next one. Under load this spreads the script's fixed cost (and a round trip)
/// over many calls; at low load a call leaves at once, alone. Every call is answered within `commandTimeoutMs` of
/// its submission. On a Cluster, whose keys live on different nodes, every call is sent alone.
///
/// The script's contract: `ARGV` holds the shared arguments, then each call's arguments in turn;
/// `KEYS` each call's keys in turn (the script knows from the arguments how many are whose); the
/// reply holds one answer per call, in order: an array, or the error message (a string) of a
/// call that failed alone.
pub struct ScriptBatcher {
    store: Arc<RedisStore>,
    script: &'static Script,
    shared: Arc<Vec<String>>,
    runtime: tokio::runtime::Handle,
    queue: Option<mpsc::UnboundedSender<Call>>,
}

struct Call {
    keys: Vec<String>,
    args: Vec<String>,
    since: Instant,
    answered: Answered,
}

impl ScriptBatcher {
    /// `runtime` runs the task that sends the batches.
    pub fn new(
        runtime: &tokio::runtime::Handle,
        store: Arc<RedisStore>,
        script: &'static Script,
        shared: Vec<String>,
    ) -> Self {
        let shared = Arc::new(shared);
        let queue = (!store.config.is_cluster()).then(|| {
            let (sender, receiver) = mpsc::unbounded_channel();
            runtime.spawn(send_batches(
                store.clone(),
                script,
                shared.clone(),
                receiver,
            ));
            sender
        });
        Self {
            store,
            script,
            shared,
            runtime: runtime.clone(),
            queue,
        }
    }

    /// Runs the script for one call; `answered` gets its answer, or the failure, within
    /// `commandTimeoutMs`.
    pub fn submit(&self, keys: Vec<String>, args: Vec<String>, answered: Answered) {
        let call = Call {
            keys,
            args,
            since: Instant::now(),
            answered,
        };
        let Some(queue) = &self.queue else {
            let (store, script, shared) = (self.store.clone(), self.script, self.shared.clone());
            self.runtime.spawn(async move {
                let calls = [(call.keys, call.args)];
                let answer = store
                    .bounded(store.eval_batch(script, &shared, &calls))
                    .await
                    .and_then(|mut answers| answers.pop().unwrap_or_else(|| Err(short_reply())));
                (call.answered)(answer);
            });
            return;
        };
        if let Err(unsent) = queue.send(call) {
            (unsent.0.answered)(Err(Failure::error(
                ErrorCode::Internal,
                "the batch sender stopped",
            )));
        }
    }
}

async fn send_batches(
    store: Arc<RedisStore>,
    script: &'static Script,
    shared: Arc<Vec<String>>,
    mut receiver: mpsc::UnboundedReceiver<Call>,
) {
    let in_flight = Arc::new(tokio::sync::Semaphore::new(BATCHES_IN_FLIGHT));
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            return;
        };
        if receiver.recv_many(&mut batch, MAX_BATCH).await == 0 {
            return;
        }
        let calls = std::mem::replace(&mut batch, Vec::with_capacity(MAX_BATCH));
        let (store, shared) = (store.clone(), shared.clone());
        tokio::spawn(async move {
            send_batch(&store, script, &shared, calls).await;
            drop(permit);
        });
    }
}

/// Sends one batch and hands out its answers.
async fn send_batch(store: &RedisStore, script: &Script, shared: &[String], batch: Vec<Call>) {
    // Calls that spent their whole timeout queued fail now; the batch gets what is left of the
    // oldest remaining call's timeout.
    let timeout = store.config.command_timeout;
    let now = Instant::now();
    let (expired, live): (Vec<_>, Vec<_>) = batch
        .into_iter()
        .partition(|call| now.duration_since(call.since) >= timeout);
    for call in expired {
        (call.answered)(Err(store.timeout_failure()));
    }
    let Some(oldest) = live.iter().map(|call| call.since).min() else {
        return;
    };
    let budget = timeout.saturating_sub(now.duration_since(oldest));
    let (calls, answered): (Vec<_>, Vec<_>) = live
        .into_iter()
        .map(|call| ((call.keys, call.args), call.answered))
        .unzip();
    match store
        .bounded_for(budget, store.eval_batch(script, shared, &calls))
        .await
    {
        Ok(answers) => {
            for (answered, answer) in answered.into_iter().zip(answers) {
                answered(answer);
            }
        }
        Err(failure) => {
            for answered in answered {
                answered(Err(failure.clone()));
            }
        }
    }
}

fn short_reply() -> Failure {
    Failure::error(
        ErrorCode::StoreError,
        "the script answered fewer values than it was given keys",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> RedisSettings {
        RedisSettings::default()
    }

    #[test]
    fn host_and_port_default_to_the_local_server() {
        let config = RedisConfig::from_settings(settings()).unwrap();
        assert_eq!(config.endpoint(), "127.0.0.1:6379");
        assert!(!config.is_cluster());
    }

    #[test]
    fn url_options_are_overridden_by_explicit_ones() {
        let config = RedisConfig::from_settings(RedisSettings {
            url: Some("redis://user:secret@example.test:6380/2".into()),
            db: Some(5),
            password: Some("other".into()),
            ..settings()
        })
        .unwrap();
        let node = &config.nodes[0];
        assert_eq!(config.endpoint(), "example.test:6380");
        assert_eq!(node.redis_settings().db(), 5);
        assert_eq!(node.redis_settings().username(), Some("user"));
        assert_eq!(node.redis_settings().password(), Some("other"));
    }

    #[test]
    fn tls_upgrades_a_tcp_address() {
        let config = RedisConfig::from_settings(RedisSettings {
            host: Some("example.test".into()),
            tls: Some(true),
            ..settings()
        })
        .unwrap();
        assert!(matches!(
            config.nodes[0].addr(),
            ConnectionAddr::TcpTls { .. }
        ));
    }

    #[test]
    fn bad_urls_are_rejected_without_echoing_them() {
        let err = RedisConfig::from_settings(RedisSettings {
            url: Some("http://user:hunter2@example.test".into()),
            ..settings()
        })
        .unwrap_err();
        assert_eq!(err.code, ErrorCode::InvalidOption);
        assert!(!err.message.contains("hunter2"), "{}", err.message);
    }

    #[test]
    fn timeouts_are_bounded() {
        for bad in [0.0, -1.0, f64::NAN, 1e9] {
            let err = RedisConfig::from_settings(RedisSettings {
                command_timeout_ms: Some(bad),
                ..settings()
            })
            .unwrap_err();
            assert!(
                err.message.contains("`commandTimeoutMs`"),
                "{}",
                err.message
            );
        }
    }

    #[test]
    fn key_slots_follow_redis_cluster() {
        // Values from the Redis Cluster specification and CLUSTER KEYSLOT.
        assert_eq!(key_slot(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(
            key_slot(b"{user1000}.following"),
            key_slot(b"{user1000}.followers")
        );
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        // An empty tag does not count: the whole key is hashed.
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{baz}"));
        assert_eq!(key_slot(b"foo{{bar}}zap"), key_slot(b"{bar"));
    }

    #[test]
    fn a_cluster_has_nodes_and_one_database() {
        let config = RedisConfig::from_settings(RedisSettings {
            cluster: Some(vec![
                "redis://127.0.0.1:7000".into(),
                "redis://127.0.0.1:7001".into(),
            ]),
            ..settings()
        })
        .unwrap();
        assert!(config.is_cluster());
        assert_eq!(config.nodes.len(), 2);
        assert!(RedisConfig::from_settings(RedisSettings {
            cluster: Some(vec![]),
            ..settings()
        })
        .is_err());
        assert!(RedisConfig::from_settings(RedisSettings {
            cluster: Some(vec!["redis://127.0.0.1:7000".into()]),
            db: Some(1),
            ..settings()
        })
        .is_err());
    }
}
