//! The Redis store: one multiplexed connection (single node or Cluster) that runs the algorithms'
//! Lua scripts, each call bounded by a timeout.
//!
//! The connection is opened on first use and reopened by itself after Redis comes back, so a
//! limiter built while Redis is down starts working as soon as Redis is up. Every call either
//! answers or fails with `ERR_STORE_UNAVAILABLE` within `command_timeout`: it never hangs.
//! Scripts go out as EVALSHA and are loaded again when Redis answers NOSCRIPT (after a restart
//! or a failover), which redis-rs's `ScriptInvocation` does for us.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{LazyLock, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{
    Cmd, ErrorKind, FromRedisValue, Pipeline, RedisError, RedisFuture, Script, ScriptInvocation,
    ServerErrorKind, Value,
};

use super::redis_config::RedisConfig;
use crate::error::{ErrorCode, Failure, Outcome};

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
    pub(super) async fn run_script<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
    ) -> Outcome<T> {
        let mut connection = self.connection().await?;
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|e| self.failure(e))
    }

    /// Runs a multi-key script (see [`ScriptBatcher`]) for `calls`; one answer per call, in
    /// order. No timeout of its own: callers bound it.
    pub(super) async fn eval_batch(
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
            return Err(super::batch::short_reply());
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
    pub(super) async fn bounded<T>(
        &self,
        work: impl std::future::Future<Output = Outcome<T>>,
    ) -> Outcome<T> {
        self.bounded_for(self.config.command_timeout, work).await
    }

    pub(super) async fn bounded_for<T>(
        &self,
        budget: Duration,
        work: impl std::future::Future<Output = Outcome<T>>,
    ) -> Outcome<T> {
        tokio::time::timeout(budget, work)
            .await
            .unwrap_or_else(|_| Err(self.timeout_failure()))
    }

    pub(super) fn timeout_failure(&self) -> Failure {
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
