//! Redis Sentinel: the primary of a master name, found through the sentinels and followed
//! through failovers.
//!
//! - The primary is asked of the sentinels (`SENTINEL get-master-addr-by-name`, those with an
//!   open connection first) and confirmed with `ROLE` before any call goes to it.
//! - It is looked for again (at most once per [`REFRESH_INTERVAL`]) when a call to it fails
//!   with a connection error or a timeout, when it answers `READONLY` (a demoted primary: it is
//!   forgotten at once, so it never takes a write; inside a script, where a call's error is its
//!   answer, too), and when a sentinel publishes
//!   `+switch-master` for the name (a subscription kept by a background task, which also asks
//!   its sentinel for the primary once subscribed and after each [`WATCH_PING`] of silence, so
//!   that a message sent while it was not subscribed is not missed for long).
//! - Meanwhile calls fail fast with `ERR_STORE_UNAVAILABLE` naming the node and the master name:
//!   a node whose connection just failed is not dialled again for [`super::link::DOWN_FOR`], and
//!   while no primary is confirmed, calls get the last lookup's error without waiting.
//!
//! Why not redis-rs's own `sentinel` module (feature `sentinel`): its `Sentinel` and
//! `SentinelClient` look the primary up through `&mut self` (one lookup at a time for every
//! call, behind a lock), set no timeout on the sentinels they ask (one that does not answer
//! stalls the lookup, hence every call), and do not follow `+switch-master`: a failover is only
//! seen when a call fails. Wrapping them would have kept all of the above to write, so the
//! primary's connection is one more [`NodeLink`], as on a single node and on a Cluster.

use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use redis::{
    AsyncConnectionConfig, Cmd, ConnectionInfo, ErrorKind, RedisError, ServerErrorKind, Value,
};

use super::batch::call_error_text;
use super::cluster::{split_node, Node, NodeError};
use super::link::{
    address_of, connection_config, info_at, is_connection_failure, NodeLink, RedisCounters,
    StoreEvent,
};
use super::redis_config::SentinelConfig;
use super::script::{query_script, LuaScript};

/// The least time between two lookups of the primary.
const REFRESH_INTERVAL: Duration = Duration::from_millis(100);

/// How long the `+switch-master` subscription waits for a message before it checks that its
/// sentinel still answers, and asks it which node is the primary (a published message reaches
/// only the subscribers of that moment: one sent while the subscription was being opened again
/// is caught this way).
const WATCH_PING: Duration = Duration::from_secs(5);

/// How long the subscription waits before it subscribes again (to the next sentinel): calls
/// that fail meanwhile still look for the primary.
const RESUBSCRIBE_AFTER: Duration = Duration::from_secs(1);

/// The primary of one master name, through its sentinels.
pub struct Sentinel {
    shared: Arc<Shared>,
    /// The `+switch-master` subscription, started by the first call.
    watcher: Mutex<Watcher>,
}

enum Watcher {
    NotStarted,
    Running(tokio::task::JoinHandle<()>),
    /// After `close()`: a call still under way does not start it again.
    Closed,
}

struct Shared {
    name: String,
    sentinels: Vec<(ConnectionInfo, NodeLink)>,
    /// A sentinel's outage is not the store's: its links report here, to no one.
    sentinel_counters: RedisCounters,
    /// Credentials, database and TLS of the data nodes.
    template: ConnectionInfo,
    connection_config: AsyncConnectionConfig,
    connect_timeout: Duration,
    primary: RwLock<Option<Primary>>,
    /// When the primary was last looked for, and why the last lookup failed; held while
    /// looking.
    lookup: tokio::sync::Mutex<Lookup>,
    counters: Arc<RedisCounters>,
}

#[derive(Clone)]
struct Primary {
    node: Node,
    link: Arc<NodeLink>,
}

#[derive(Default)]
struct Lookup {
    at: Option<Instant>,
    failed: Option<(Option<Node>, RedisError)>,
    /// The last primary installed (kept when it is forgotten), to tell a move.
    installed: Option<Node>,
}

impl Sentinel {
    pub fn new(
        config: &SentinelConfig,
        template: &ConnectionInfo,
        connect_timeout: Duration,
        command_timeout: Duration,
        counters: Arc<RedisCounters>,
    ) -> Self {
        let connection_config = connection_config(connect_timeout, command_timeout);
        let sentinels = config
            .sentinels
            .iter()
            .map(|info| {
                let node = address_of(info.addr());
                let link = NodeLink::new(info.clone(), connection_config.clone(), node);
                (info.clone(), link)
            })
            .collect();
        Self {
            shared: Arc::new(Shared {
                name: config.name.clone(),
                sentinels,
                sentinel_counters: RedisCounters::default(),
                template: template.clone(),
                connection_config,
                connect_timeout,
                primary: RwLock::new(None),
                lookup: tokio::sync::Mutex::new(Lookup::default()),
                counters,
            }),
            watcher: Mutex::new(Watcher::NotStarted),
        }
    }

    /// Finds the primary (unless known) and opens its connection.
    pub async fn connect(&self) -> Result<(), NodeError> {
        self.watch();
        let primary = self.shared.primary().await?;
        primary
            .link
            .connection(&self.shared.counters)
            .await
            .map(drop)
            .map_err(|error| self.failed(&primary, error))
    }

    /// Runs `cmd` (a [`LuaScript::command`] of `script` when given, see [`query_script`]) on
    /// the primary.
    pub async fn query(&self, cmd: &Cmd, script: Option<&LuaScript>) -> Result<Value, NodeError> {
        self.watch();
        let shared = &self.shared;
        let primary = shared.primary().await?;
        let result = match primary.link.connection(&shared.counters).await {
            Ok(mut connection) => {
                query_script(&mut connection, cmd, script, false, &shared.counters).await
            }
            Err(error) => Err(error),
        };
        result
            .and_then(refused_as_replica)
            .map_err(|error| self.failed(&primary, error))
    }

    /// How messages name the primary: its address and the master name.
    pub fn label(&self) -> String {
        match self.shared.current() {
            Some(primary) => self.shared.label(&primary.node).to_string(),
            None => format!("the primary of `{}`", self.shared.name),
        }
    }

    /// The primary known, when its connection is open (see
    /// [`super::redis::RedisStore::direct_node`]).
    pub fn open_primary(&self) -> Option<Node> {
        let primary = self.shared.current()?;
        primary.link.is_open().then_some(primary.node)
    }

    /// Where `node` is and how to log in to it, while it is the primary known.
    pub fn info_of(&self, node: &Node) -> Option<ConnectionInfo> {
        let primary = self
            .shared
            .current()
            .filter(|primary| &primary.node == node)?;
        Some(primary.link.info().clone())
    }

    /// Stops following the sentinels and drops the connections.
    pub fn close(&self) {
        self.stop_watching(Watcher::Closed);
        *self
            .shared
            .primary
            .write()
            .unwrap_or_else(|p| p.into_inner()) = None;
        for (_, link) in &self.shared.sentinels {
            link.close();
        }
    }

    /// After a call to `primary` failed with `error`: looks for the primary again when the
    /// error says it may have moved.
    fn failed(&self, primary: &Primary, error: RedisError) -> NodeError {
        let shared = &self.shared;
        primary.link.failed(&error, &shared.counters);
        let demoted = error.kind() == ErrorKind::Server(ServerErrorKind::ReadOnly);
        if demoted {
            shared.forget(&primary.node);
        }
        if demoted || is_connection_failure(&error) || error.is_timeout() {
            let shared = shared.clone();
            tokio::spawn(async move {
                let _ = shared.refresh().await;
            });
        }
        NodeError {
            node: Some(shared.label(&primary.node)),
            error,
        }
    }

    /// Starts the `+switch-master` subscription, once.
    fn watch(&self) {
        let mut watcher = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        if matches!(*watcher, Watcher::NotStarted) {
            *watcher = Watcher::Running(tokio::spawn(watch(Arc::downgrade(&self.shared))));
        }
    }

    fn stop_watching(&self, then: Watcher) {
        let mut watcher = self.watcher.lock().unwrap_or_else(|p| p.into_inner());
        if let Watcher::Running(task) = std::mem::replace(&mut *watcher, then) {
            task.abort();
        }
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        self.stop_watching(Watcher::Closed);
    }
}

impl Shared {
    fn current(&self) -> Option<Primary> {
        self.primary
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn label(&self, node: &str) -> Node {
        Arc::from(format!("{node} (primary of `{}`, by Sentinel)", self.name))
    }

    /// The primary, looked for when not known.
    async fn primary(&self) -> Result<Primary, NodeError> {
        if let Some(primary) = self.current() {
            return Ok(primary);
        }
        self.refresh().await?;
        self.current().ok_or_else(|| NodeError {
            node: None,
            error: no_primary(&self.name),
        })
    }

    /// Forgets `node` as the primary (it is a replica now).
    fn forget(&self, node: &Node) {
        let mut primary = self.primary.write().unwrap_or_else(|p| p.into_inner());
        if primary.as_ref().is_some_and(|p| &p.node == node) {
            *primary = None;
        }
    }

    /// Looks for the primary, unless that was done in the last [`REFRESH_INTERVAL`] (then
    /// answers as that lookup did).
    async fn refresh(&self) -> Result<(), NodeError> {
        let mut lookup = self.lookup.lock().await;
        if lookup.at.is_some_and(|at| at.elapsed() < REFRESH_INTERVAL) {
            return match (&lookup.failed, self.current()) {
                (Some((node, error)), None) => Err(NodeError {
                    node: node.clone(),
                    error: error.clone(),
                }),
                _ => Ok(()),
            };
        }
        let found = self.find().await;
        lookup.at = Some(Instant::now());
        match found {
            Ok(primary) => {
                self.install(primary, &mut lookup);
                lookup.failed = None;
                Ok(())
            }
            Err(failure) => {
                lookup.failed = Some((failure.node.clone(), failure.error.clone()));
                Err(failure)
            }
        }
    }

    /// Asks the sentinels (those with an open connection first) for the primary, and confirms
    /// the address named with `ROLE`.
    async fn find(&self) -> Result<Primary, NodeError> {
        let mut order: Vec<&(ConnectionInfo, NodeLink)> = self.sentinels.iter().collect();
        order.sort_by_key(|(_, link)| !link.is_open());
        let mut tried: Vec<Node> = Vec::new();
        let mut last = NodeError {
            node: None,
            error: no_primary(&self.name),
        };
        for (info, link) in order {
            let sentinel = Arc::from(format!(
                "{} (Sentinel of `{}`)",
                address_of(info.addr()),
                self.name
            ));
            let node = match self.ask(link).await {
                Ok(node) => node,
                Err(error) => {
                    link.failed(&error, &self.sentinel_counters);
                    last = NodeError {
                        node: Some(sentinel),
                        error,
                    };
                    continue;
                }
            };
            if tried.contains(&node) {
                continue;
            }
            tried.push(node.clone());
            let primary = self.primary_at(&node).map_err(|error| NodeError {
                node: Some(sentinel),
                error,
            })?;
            match self.confirm(&primary).await {
                Ok(()) => return Ok(primary),
                Err(error) => {
                    primary.link.failed(&error, &self.counters);
                    last = NodeError {
                        node: Some(self.label(&node)),
                        error,
                    };
                }
            }
        }
        Err(last)
    }

    /// `SENTINEL get-master-addr-by-name`, as `host:port`.
    async fn ask(&self, link: &NodeLink) -> Result<Node, RedisError> {
        let mut connection = link.connection(&self.sentinel_counters).await?;
        let reply: Option<(String, u16)> = redis::cmd("SENTINEL")
            .arg("get-master-addr-by-name")
            .arg(&self.name)
            .query_async(&mut connection)
            .await?;
        let (host, port) = reply.ok_or_else(|| {
            RedisError::from((
                ErrorKind::Server(ServerErrorKind::MasterDown),
                "the sentinel monitors no master of this name",
                self.name.clone(),
            ))
        })?;
        Ok(node_name(&host, port))
    }

    /// `ROLE` on `primary`: it must say `master`.
    async fn confirm(&self, primary: &Primary) -> Result<(), RedisError> {
        let mut connection = primary.link.connection(&self.counters).await?;
        let role: Value = redis::cmd("ROLE").query_async(&mut connection).await?;
        let is_master = matches!(&role, Value::Array(fields)
            if matches!(fields.first(), Some(Value::BulkString(role)) if role == b"master"));
        if is_master {
            return Ok(());
        }
        Err(RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "the node the sentinels name is not a primary (yet)",
        )))
    }

    /// The primary at `node`: the current one's link when it is the same node.
    fn primary_at(&self, node: &Node) -> Result<Primary, RedisError> {
        if let Some(primary) = self.current().filter(|p| &p.node == node) {
            return Ok(primary);
        }
        let (host, port) = split_node(node).ok_or_else(|| {
            RedisError::from((ErrorKind::Parse, "the sentinel named no host:port address"))
        })?;
        let link = NodeLink::new(
            info_at(&self.template, host, port),
            self.connection_config.clone(),
            node.to_string(),
        );
        Ok(Primary {
            node: node.clone(),
            link: Arc::new(link),
        })
    }

    /// Makes `primary` the one calls go to; a move to another node is reported as a
    /// `reconnect` of that node.
    fn install(&self, primary: Primary, lookup: &mut Lookup) {
        let moved = lookup
            .installed
            .as_ref()
            .is_some_and(|old| old != &primary.node);
        let node = primary.node.clone();
        *self.primary.write().unwrap_or_else(|p| p.into_inner()) = Some(primary);
        lookup.installed = Some(node.clone());
        if moved {
            self.counters.emit(StoreEvent::Reconnected {
                node: node.to_string(),
            });
        }
    }

    /// Asks sentinel number `sentinel` which node is the primary: when that is not the one
    /// calls go to, confirms it as after `+switch-master`.
    async fn reconcile(&self, sentinel: usize) {
        let link = &self.sentinels[sentinel].1;
        let mut asked = self.ask(link).await;
        if let Err(error) = &asked {
            // Its connection may have been cut with the subscription's: opened again once.
            link.failed(error, &self.sentinel_counters);
            tokio::time::sleep(super::link::DOWN_FOR).await;
            asked = self.ask(link).await;
        }
        let Ok(node) = asked else {
            return;
        };
        if self.current().is_none_or(|primary| primary.node != node) {
            self.switched(node).await;
        }
    }

    /// After `+switch-master` named `node`: confirms it, and calls go there.
    async fn switched(&self, node: Node) {
        let mut lookup = self.lookup.lock().await;
        if let Ok(primary) = self.primary_at(&node) {
            if self.confirm(&primary).await.is_ok() {
                self.install(primary, &mut lookup);
                lookup.failed = None;
            }
        }
    }
}

/// Follows `+switch-master` on one sentinel after another, while the store lives; asks that
/// sentinel for the primary once subscribed and after every [`WATCH_PING`] of silence.
async fn watch(shared: Weak<Shared>) {
    for turn in 0usize.. {
        let Some(strong) = shared.upgrade() else {
            return;
        };
        let sentinel = turn % strong.sentinels.len();
        let (info, name) = (strong.sentinels[sentinel].0.clone(), strong.name.clone());
        let timeout = strong.connect_timeout;
        drop(strong);
        let subscribed = tokio::time::timeout(timeout, async {
            let mut pubsub = redis::Client::open(info)?.get_async_pubsub().await?;
            pubsub.subscribe("+switch-master").await?;
            Ok::<_, RedisError>(pubsub)
        })
        .await;
        if let Ok(Ok(pubsub)) = subscribed {
            let (mut sink, mut messages) = pubsub.split();
            let mut reconcile = true;
            loop {
                if std::mem::take(&mut reconcile) {
                    let Some(shared) = shared.upgrade() else {
                        return;
                    };
                    shared.reconcile(sentinel).await;
                }
                let message = match tokio::time::timeout(WATCH_PING, messages.next()).await {
                    Ok(Some(message)) => message,
                    Ok(None) => break,
                    Err(_) => match tokio::time::timeout(timeout, sink.ping::<Value>()).await {
                        Ok(Ok(_)) => {
                            reconcile = true;
                            continue;
                        }
                        _ => break,
                    },
                };
                let payload: String = message.get_payload().unwrap_or_default();
                // `<name> <old host> <old port> <new host> <new port>`
                let fields: Vec<&str> = payload.split(' ').collect();
                let Some(shared) = shared.upgrade() else {
                    return;
                };
                if let [master, _, _, host, port] = fields[..] {
                    if master == name {
                        if let Ok(port) = port.parse() {
                            shared.switched(node_name(host, port)).await;
                        }
                    }
                }
            }
        }
        tokio::time::sleep(RESUBSCRIBE_AFTER).await;
    }
}

/// A script's answer, or the `READONLY` error that one of its calls met: the scripts answer
/// each call that fails alone with its error message, and on a replica every write fails so.
fn refused_as_replica(value: Value) -> Result<Value, RedisError> {
    let readonly = |answer: &Value| matches!(answer, Value::BulkString(message) if call_error_text(message).starts_with("READONLY "));
    let demoted = match &value {
        Value::Array(answers) => answers.iter().find(|answer| readonly(answer)),
        _ => None,
    };
    match demoted {
        Some(Value::BulkString(message)) => Err(RedisError::from((
            ErrorKind::Server(ServerErrorKind::ReadOnly),
            "the primary was demoted to a replica",
            call_error_text(message),
        ))),
        _ => Ok(value),
    }
}

fn node_name(host: &str, port: u16) -> Node {
    Arc::from(format!("{host}:{port}"))
}

fn no_primary(name: &str) -> RedisError {
    RedisError::from((
        ErrorKind::Server(ServerErrorKind::MasterDown),
        "no sentinel named a primary for the master name",
        name.to_owned(),
    ))
}
