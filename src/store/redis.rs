//! The Redis store: connections to a single node or to a Cluster that run the algorithms'
//! Lua scripts, each call bounded by a timeout.
//!
//! Connections are opened on first use and reopened by themselves after Redis comes back, so a
//! limiter built while Redis is down starts working as soon as Redis is up. Every call either
//! answers or fails with `ERR_STORE_UNAVAILABLE` within `command_timeout`: it never hangs.
//! Scripts go out as EVALSHA and are loaded again when Redis answers NOSCRIPT (after a restart
//! or a failover). A Cluster is followed by [`super::cluster`], a primary behind Redis Sentinel
//! by [`super::sentinel`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::{Cmd, ConnectionAddr, ConnectionInfo, ErrorKind, RedisError, ServerErrorKind, Value};

use super::batch::Answer;
use super::cluster::{Cluster, Node};
use super::link::{NodeLink, RedisCounters};
use super::redis_config::RedisConfig;
use super::script::{query_script, LuaScript};
use super::sentinel::Sentinel;
use crate::error::{ErrorCode, Failure, Outcome};

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

/// The `FCALL` or `EVALSHA` (see [`LuaScript::command`]) of a batch of `calls` of `script` (see
/// [`super::batch::ScriptBatcher`]).
pub(super) fn batch_command(
    script: &LuaScript,
    counters: &RedisCounters,
    shared: &[String],
    calls: &[(Vec<String>, Vec<String>)],
) -> Cmd {
    let keys: Vec<&String> = calls.iter().flat_map(|(keys, _)| keys).collect();
    let mut cmd = script.command(counters);
    cmd.arg(keys.len()).arg(&keys).arg(shared);
    let (shape, args) = super::batch::call_arguments(calls);
    cmd.arg(shape).arg(args);
    cmd
}

/// Connects to `host` where a connection info names `name` instead: TLS then checks the
/// server's certificate against `name` (the `tls.servername` option).
struct ServerNameResolver {
    name: String,
    host: String,
}

impl redis::io::AsyncDNSResolver for ServerNameResolver {
    fn resolve<'a, 'b: 'a>(
        &'a self,
        host: &'b str,
        port: u16,
    ) -> redis::RedisFuture<'a, Box<dyn Iterator<Item = std::net::SocketAddr> + Send + 'a>> {
        let host = if host == self.name { &self.host } else { host };
        Box::pin(async move {
            let addresses = tokio::net::lookup_host((host, port)).await?;
            Ok(Box::new(addresses) as Box<dyn Iterator<Item = _> + Send>)
        })
    }
}

/// A shared, lazily opened connection to Redis.
pub struct RedisStore {
    id: u64,
    /// Its nodes are reached without TLS.
    plain: bool,
    /// A single node's address (see [`Self::direct_node`]).
    single_node: Node,
    config: RedisConfig,
    target: Target,
    closed: AtomicBool,
    counters: Arc<RedisCounters>,
}

enum Target {
    Single(Box<NodeLink>),
    Cluster(Cluster),
    Sentinel(Sentinel),
}

impl RedisStore {
    pub fn new(config: RedisConfig) -> Self {
        let counters = Arc::new(RedisCounters::default());
        counters
            .eval_only
            .store(!config.functions, Ordering::Relaxed);
        let target = if config.cluster {
            Target::Cluster(Cluster::new(
                &config.nodes,
                config.connect_timeout,
                config.command_timeout,
                counters.clone(),
            ))
        } else if let Some(sentinel) = &config.sentinel {
            Target::Sentinel(Sentinel::new(
                sentinel,
                &config.nodes[0],
                config.connect_timeout,
                config.command_timeout,
                counters.clone(),
            ))
        } else {
            let mut connection_config =
                super::link::connection_config(config.connect_timeout, config.command_timeout);
            if let Some((name, host)) = &config.server_name {
                connection_config = connection_config.set_dns_resolver(ServerNameResolver {
                    name: name.clone(),
                    host: host.clone(),
                });
            }
            Target::Single(Box::new(NodeLink::new(
                config.nodes[0].clone(),
                connection_config,
                config.endpoint.clone(),
            )))
        };
        static IDS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        Self {
            id: IDS.fetch_add(1, Ordering::Relaxed),
            plain: matches!(
                config.nodes[0].addr(),
                ConnectionAddr::Tcp(..) | ConnectionAddr::Unix(_)
            ),
            single_node: Node::from(super::link::address_of(config.nodes[0].addr())),
            config,
            target,
            closed: AtomicBool::new(false),
            counters,
        }
    }

    pub fn config(&self) -> &RedisConfig {
        &self.config
    }

    /// What the store has done (calls, failures, reconnects, ...), for `stats()`.
    pub fn counters(&self) -> &RedisCounters {
        &self.counters
    }

    /// Opens the connection now (it is otherwise opened by the first call); on a Cluster, reads
    /// the slot map.
    pub async fn connect(&self) -> Outcome<()> {
        self.bounded(async {
            self.check_open()?;
            match &self.target {
                Target::Single(link) => link
                    .connection(&self.counters)
                    .await
                    .map(drop)
                    .map_err(|e| self.failure(None, e)),
                Target::Cluster(cluster) => cluster
                    .connect()
                    .await
                    .map_err(|e| self.failure(e.node.as_deref(), e.error)),
                Target::Sentinel(sentinel) => sentinel
                    .connect()
                    .await
                    .map_err(|e| self.failure(e.node.as_deref(), e.error)),
            }
        })
        .await
    }

    /// Runs `cmd` on the node that holds `key` (on a single node: the node); `script` is the
    /// script whose [`LuaScript::command`] it is (see [`query_script`]). No timeout of its own:
    /// callers bound it.
    async fn query(&self, key: &str, cmd: &Cmd, script: Option<&LuaScript>) -> Outcome<Value> {
        self.check_open()?;
        match &self.target {
            Target::Single(link) => {
                let mut connection = link
                    .connection(&self.counters)
                    .await
                    .map_err(|e| self.failure(None, e))?;
                query_script(&mut connection, cmd, script, false, &self.counters)
                    .await
                    .map_err(|e| {
                        link.failed(&e, &self.counters);
                        self.failure(None, e)
                    })
            }
            Target::Cluster(cluster) => cluster
                .query(key, cmd, script)
                .await
                .map_err(|e| self.failure(e.node.as_deref(), e.error)),
            Target::Sentinel(sentinel) => sentinel
                .query(cmd, script)
                .await
                .map_err(|e| self.failure(e.node.as_deref(), e.error)),
        }
    }

    /// Runs a multi-key script (see [`super::batch::ScriptBatcher`]) for `calls`; one answer per
    /// call, in order. No timeout of its own: callers bound it.
    pub(super) async fn eval_batch(
        &self,
        script: &LuaScript,
        shared: &[String],
        calls: &[(Vec<String>, Vec<String>)],
    ) -> Outcome<Vec<Outcome<Answer>>> {
        let cmd = batch_command(script, &self.counters, shared, calls);
        let first_key = calls
            .first()
            .and_then(|(keys, _)| keys.first())
            .map_or("", |key| key.as_str());
        self.count_batch(calls.len());
        // (Counted once the reply is in, or the call given up: see `super::direct::count_reply`.)
        let _replied = RepliedOnDrop;
        let reply = self.query(first_key, &cmd, Some(script)).await?;
        self.batch_answers(reply, calls.len(), first_key)
    }

    /// Counts a script call sent with `calls` calls, for `stats()`.
    pub(super) fn count_batch(&self, calls: usize) {
        self.counters.count(&self.counters.batches);
        self.counters
            .add(&self.counters.batched_calls, calls as u64);
    }

    /// A batch's reply (see [`Self::eval_batch`]) as one answer per call.
    pub(super) fn batch_answers(
        &self,
        reply: Value,
        calls: usize,
        first_key: &str,
    ) -> Outcome<Vec<Outcome<Answer>>> {
        let mut reply = match reply {
            Value::Array(reply) if reply.len() == calls || reply.len() == calls + 1 => reply,
            _ => return Err(super::batch::short_reply()),
        };
        let server_now = match (reply.len() > calls).then(|| reply.pop()).flatten() {
            Some(Value::Int(now)) => Some(now),
            Some(_) => return Err(super::batch::short_reply()),
            None => None,
        };
        Ok(reply
            .into_iter()
            .map(|answer| match answer {
                // The script answers a call that failed alone with its error message. A replica
                // (a primary demoted, at a fixed address) refuses every write: Redis is then
                // unavailable for this store, as when it refuses the command itself.
                Value::BulkString(message) => {
                    let message = super::batch::call_error_text(&message);
                    let node = self.node_of(first_key);
                    let failure = if message.starts_with("READONLY ") {
                        Failure::error(
                            ErrorCode::StoreUnavailable,
                            format!("Redis at {node} is unavailable: a replica: {message}"),
                        )
                    } else {
                        Failure::error(
                            ErrorCode::StoreError,
                            format!("Redis at {node} answered with an error: {message}"),
                        )
                    };
                    Err(failure.with_cause("ResponseError", message))
                }
                value => Ok(Answer {
                    value,
                    server_now,
                    server_now_lag: 0,
                }),
            })
            .collect())
    }

    /// Where a lone call may go by the direct lane (`super::direct`): the node, when its
    /// connection is open (a node never reached, or down, is left to the runtime, which opens
    /// it, loads the scripts and reports outages). `None` with TLS (the lane speaks plain TCP and
    /// unix sockets), on a Cluster (whose calls are sent at once, never held to the end of the
    /// turn, where a lone call is told apart: see `super::batch::send_held_calls`) and once
    /// closed.
    pub fn direct_node(&self) -> Option<Node> {
        if !self.plain || self.is_closed() {
            return None;
        }
        match &self.target {
            Target::Single(link) => link.is_open().then(|| self.single_node.clone()),
            Target::Sentinel(sentinel) => sentinel.open_primary(),
            Target::Cluster(_) => None,
        }
    }

    /// Where `node` (from [`Self::direct_node`]) is and how to log in to it.
    pub fn node_info(&self, node: &Node) -> Option<ConnectionInfo> {
        match &self.target {
            Target::Single(link) => Some(link.info().clone()),
            Target::Sentinel(sentinel) => sentinel.info_of(node),
            Target::Cluster(_) => None,
        }
    }

    /// A number no other store of this process has: the direct lane's connections are this
    /// store's own.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The failure of a call whose connection was lost while it waited for its answer: the
    /// I/O error the runtime's connection would have failed it with.
    pub(super) fn lost_failure(&self, key: &str, message: &str) -> Failure {
        let node = self.node_of(key);
        let lost = std::io::Error::new(
            std::io::ErrorKind::ConnectionReset,
            format!("the connection was lost ({message})"),
        );
        self.failure(Some(&node), RedisError::from(lost))
    }

    /// Deletes keys (of one slot, on a Cluster), within `commandTimeoutMs`.
    pub async fn delete(&self, keys: &[String]) -> Outcome<()> {
        let first_key = keys.first().map_or("", |key| key.as_str());
        let outcome = self
            .bounded(async { self.query(first_key, &Cmd::del(keys), None).await.map(drop) })
            .await;
        self.count_call(&outcome);
        outcome
    }

    /// Closes the connections. Calls made after this fail with `ERR_STORE_CLOSED`; calls under
    /// way finish on the connection they hold.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        match &self.target {
            Target::Single(link) => link.close(),
            Target::Cluster(cluster) => cluster.close(),
            Target::Sentinel(sentinel) => sentinel.close(),
        }
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }

    fn check_open(&self) -> Outcome<()> {
        if self.is_closed() {
            return Err(Failure::error(
                ErrorCode::StoreClosed,
                "the Redis store was closed with close()",
            ));
        }
        Ok(())
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
                self.target_label(),
                self.config.command_timeout.as_millis()
            ),
        )
        .with_cause("Timeout", "the command timed out")
    }

    /// Counts a call and how it ended.
    pub(super) fn count_call<T>(&self, outcome: &Outcome<T>) {
        let counters = &self.counters;
        counters.count(&counters.calls);
        if let Err(failure) = outcome {
            counters.count(match failure.code {
                ErrorCode::StoreUnavailable => &counters.unavailable,
                ErrorCode::StoreClosed => &counters.closed,
                _ => &counters.errors,
            });
        }
    }

    /// The configured endpoint, for messages; through Sentinel, the primary known.
    fn target_label(&self) -> String {
        match &self.target {
            Target::Sentinel(sentinel) => sentinel.label(),
            _ => self.config.endpoint.clone(),
        }
    }

    /// The node that serves `key`, for messages: on a single node, the node.
    fn node_of(&self, key: &str) -> String {
        match &self.target {
            Target::Cluster(cluster) => cluster
                .owner_of(key)
                .map_or_else(|| self.config.endpoint.clone(), |node| node.to_string()),
            Target::Sentinel(sentinel) => sentinel.label(),
            Target::Single(_) => self.config.endpoint.clone(),
        }
    }

    /// Sorts a redis-rs error at `node` (default: the configured endpoint) into "Redis is
    /// unavailable" or "Redis said no".
    fn failure(&self, node: Option<&str>, error: RedisError) -> Failure {
        let node = node.unwrap_or(&self.config.endpoint);
        let unavailable = error.is_io_error()
            || error.is_timeout()
            || error.is_connection_dropped()
            || error.is_connection_refusal()
            || matches!(
                error.kind(),
                ErrorKind::AuthenticationFailed
                    | ErrorKind::Server(
                        ServerErrorKind::BusyLoading
                            | ServerErrorKind::MasterDown
                            | ServerErrorKind::ClusterDown
                            | ServerErrorKind::TryAgain
                            | ServerErrorKind::ReadOnly
                    )
            );
        let cause_code = format!("{:?}", error.kind());
        let mut cause_message = error.to_string();
        // A replica refused the command itself (an FCALL, whose Function may write): named as a
        // write refused inside a script is (see `batch_answers`).
        if error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly) {
            if let Some(detail) = cause_message.strip_prefix("ReadOnly: ") {
                cause_message = format!("a replica: READONLY {detail}");
            }
        }
        // No password, a wrong one, or a user that is off: Redis says so in several ways (a
        // request from an unauthenticated client may also be cut short as a protocol error).
        let refused = error.kind() == ErrorKind::AuthenticationFailed
            || matches!(error.code(), Some("NOAUTH" | "WRONGPASS"))
            || cause_message.contains("unauthenticated");
        if refused {
            Failure::error(
                ErrorCode::StoreUnavailable,
                format!(
                    "Redis at {node} refused the connection's credentials (check `username` and \
                     `password`): {cause_message}"
                ),
            )
        } else if unavailable {
            Failure::error(
                ErrorCode::StoreUnavailable,
                format!("Redis at {node} is unavailable: {cause_message}"),
            )
        } else {
            Failure::error(
                ErrorCode::StoreError,
                format!("Redis at {node} answered with an error: {cause_message}"),
            )
        }
        .with_cause(cause_code, cause_message)
    }
}

/// Counts a batch's script reply for the direct lanes' estimates of the server's clock when
/// dropped: once the reply came, failed, or was given up ([`super::direct::count_reply`]).
struct RepliedOnDrop;

impl Drop for RepliedOnDrop {
    fn drop(&mut self) {
        super::direct::count_reply();
    }
}
