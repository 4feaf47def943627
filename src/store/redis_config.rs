//! How to reach Redis: the user's connection settings, checked and turned into redis-rs
//! connection infos. Error messages name the option and never echo a URL (it may hold a
//! password).

use std::time::Duration;

use redis::{
    ClientTlsConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisError,
    TlsCertificates,
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
    /// A unix socket's path (instead of `url`, `host` and `port`).
    pub path: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub db: Option<i64>,
    pub tls: Option<bool>,
    /// TLS settings beyond on/off (a private CA, a client certificate, ...); imply `tls`.
    pub tls_options: Option<TlsSettings>,
    /// URLs of some Cluster nodes: the store then speaks Redis Cluster.
    pub cluster: Option<Vec<String>>,
    /// Sentinels (`host`, `port`) that know the primary of `name`.
    pub sentinels: Option<Vec<(String, u16)>>,
    /// The master name the sentinels monitor.
    pub name: Option<String>,
    pub sentinel_username: Option<String>,
    pub sentinel_password: Option<String>,
    pub connect_timeout_ms: Option<f64>,
    pub command_timeout_ms: Option<f64>,
    /// `false`: scripts always go as `EVALSHA`, never as Functions.
    pub functions: Option<bool>,
}

/// TLS settings, with Node's `tls.connect` names.
#[derive(Debug, Clone, Default)]
pub struct TlsSettings {
    /// Certificates (PEM) to trust instead of the system's.
    pub ca: Option<Vec<u8>>,
    /// A client certificate (PEM), for servers that ask for one (`tls-auth-clients`).
    pub cert: Option<Vec<u8>>,
    /// The client certificate's private key (PEM).
    pub key: Option<Vec<u8>>,
    /// The name the server's certificate must carry, when not the host connected to.
    pub servername: Option<String>,
    /// `false` accepts any certificate (tests only). Default `true`.
    pub reject_unauthorized: Option<bool>,
}

/// Validated settings.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    pub(super) nodes: Vec<ConnectionInfo>,
    pub(super) cluster: bool,
    /// Through Sentinel: `nodes[0]` then holds the credentials, database and TLS of the data
    /// nodes (its address is replaced by the primary's).
    pub(super) sentinel: Option<SentinelConfig>,
    pub(super) connect_timeout: Duration,
    pub(super) command_timeout: Duration,
    /// Scripts may run as Redis Functions (see [`super::script`]).
    pub(super) functions: bool,
    /// `host:port` of the first node, for error messages (never a password).
    pub(super) endpoint: String,
    /// With `tls.servername`: the name the connection info carries as its host (so that TLS
    /// checks the certificate against it), and the real host to connect to.
    pub(super) server_name: Option<(String, String)>,
}

/// The sentinels to ask for the primary of `name`.
#[derive(Debug, Clone)]
pub struct SentinelConfig {
    pub(super) name: String,
    pub(super) sentinels: Vec<ConnectionInfo>,
}

/// The schemes of the Sentinel URL form (`rediss+` connects to the data nodes with TLS).
const SENTINEL_SCHEMES: [&str; 2] = ["redis+sentinel://", "rediss+sentinel://"];

impl RedisConfig {
    pub fn from_settings(settings: RedisSettings) -> Outcome<Self> {
        let settings = with_sentinel_url(settings)?;
        let sentinel = sentinel_config(&settings)?;
        let connect_timeout = timeout_option("connectTimeoutMs", settings.connect_timeout_ms)?;
        let command_timeout = timeout_option("commandTimeoutMs", settings.command_timeout_ms)?;
        let cluster = settings.cluster.is_some();
        let servername = settings
            .tls_options
            .as_ref()
            .and_then(|tls| tls.servername.clone());
        if (cluster || sentinel.is_some()) && servername.is_some() {
            return Err(invalid(
                "`tls.servername` is for a single node: a Cluster's (or Sentinel's) nodes each have \
                 their own name",
            ));
        }
        check_path(&settings)?;
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
        let endpoint = match &sentinel {
            Some(sentinel) => sentinel.label(),
            None => super::link::address_of(nodes[0].addr()),
        };
        let (nodes, server_name) = match (servername, nodes[0].addr()) {
            (Some(name), ConnectionAddr::TcpTls { host, .. }) => {
                let host = host.clone();
                let info = nodes[0].clone();
                let addr = match info.addr().clone() {
                    ConnectionAddr::TcpTls {
                        port,
                        insecure,
                        tls_params,
                        ..
                    } => ConnectionAddr::TcpTls {
                        host: name.clone(),
                        port,
                        insecure,
                        tls_params,
                    },
                    other => other,
                };
                (vec![info.set_addr(addr)], Some((name, host)))
            }
            (Some(_), _) => {
                return Err(invalid("`tls.servername` needs a TCP connection with TLS"))
            }
            (None, _) => (nodes, None),
        };
        Ok(Self {
            nodes,
            cluster,
            sentinel,
            connect_timeout,
            command_timeout,
            functions: settings.functions.unwrap_or(true),
            endpoint,
            server_name,
        })
    }

    pub fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// Whether the primary is found through Sentinel.
    pub fn is_sentinel(&self) -> bool {
        self.sentinel.is_some()
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// `commandTimeoutMs`: every call answers or fails within it.
    pub fn command_timeout(&self) -> Duration {
        self.command_timeout
    }
}

impl SentinelConfig {
    /// How messages name the primary while it is not known: the master name and the sentinels.
    pub(super) fn label(&self) -> String {
        let sentinels: Vec<String> = self
            .sentinels
            .iter()
            .map(|info| super::link::address_of(info.addr()))
            .collect();
        format!(
            "the primary of `{}` (Sentinel {})",
            self.name,
            sentinels.join(",")
        )
    }
}

/// `settings` with a `redis+sentinel://` URL read into `sentinels`, `name`, the credentials,
/// `db` and TLS (explicit options win, as over any URL).
fn with_sentinel_url(settings: RedisSettings) -> Outcome<RedisSettings> {
    let Some(url) = settings.url.as_deref() else {
        return Ok(settings);
    };
    let Some(scheme) = SENTINEL_SCHEMES.iter().find(|s| url.starts_with(**s)) else {
        return Ok(settings);
    };
    let url = SentinelUrl::parse(&url[scheme.len()..]).ok_or_else(|| {
        invalid(
            "`url` is not a valid Sentinel URL: \
             redis+sentinel://[user[:password]@]host[:port][,host[:port]...]/name[/db]",
        )
    })?;
    if settings.sentinels.is_some() {
        return Err(invalid(
            "`sentinels` cannot be combined with a Sentinel `url`, which lists them",
        ));
    }
    let tls = scheme.starts_with("rediss").then_some(true);
    Ok(RedisSettings {
        url: None,
        sentinels: Some(url.sentinels),
        name: settings.name.or(Some(url.name)),
        username: settings.username.or(url.username),
        password: settings.password.or(url.password),
        db: settings.db.or(url.db),
        tls: settings.tls.or(tls),
        ..settings
    })
}

/// The parts of a Sentinel URL after its scheme.
struct SentinelUrl {
    sentinels: Vec<(String, u16)>,
    name: String,
    username: Option<String>,
    password: Option<String>,
    db: Option<i64>,
}

impl SentinelUrl {
    /// `[user[:password]@]host[:port][,host[:port]...]/name[/db]`; `None` when malformed.
    fn parse(rest: &str) -> Option<Self> {
        let (authority, path) = rest.split_once('/')?;
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let (username, password) = match userinfo.map(|u| u.split_once(':').unwrap_or((u, ""))) {
            Some((user, password)) => (decoded(user)?, decoded(password)?),
            None => (None, None),
        };
        let sentinels = hosts
            .split(',')
            .map(sentinel_address)
            .collect::<Option<Vec<_>>>()?;
        let mut path = path.trim_end_matches('/').splitn(2, '/');
        let name = decoded(path.next()?)??;
        let db = match path.next() {
            Some(db) => Some(db.parse().ok().filter(|db| *db >= 0)?),
            None => None,
        };
        Some(Self {
            sentinels,
            name,
            username,
            password,
            db,
        })
    }
}

/// `host[:port]` (an IPv6 host in brackets), the port 26379 by default.
fn sentinel_address(address: &str) -> Option<(String, u16)> {
    let (host, port) = match address.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && !port.contains(']') => {
            (host, port.parse().ok().filter(|port| *port > 0)?)
        }
        _ => (address, DEFAULT_SENTINEL_PORT),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    (!host.is_empty()).then(|| (host.to_owned(), port))
}

/// Sentinel's own port, when a URL gives none.
pub const DEFAULT_SENTINEL_PORT: u16 = 26379;

/// A percent-decoded URL part; `Some(None)` when empty, `None` when not UTF-8.
fn decoded(part: &str) -> Option<Option<String>> {
    if part.is_empty() {
        return Some(None);
    }
    let mut bytes = Vec::with_capacity(part.len());
    let mut rest = part.as_bytes();
    while let Some((&byte, tail)) = rest.split_first() {
        let hex = (byte == b'%')
            .then(|| tail.get(..2))
            .flatten()
            .and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match hex {
            Some(value) => {
                bytes.push(value);
                rest = &tail[2..];
            }
            None => {
                bytes.push(byte);
                rest = tail;
            }
        }
    }
    String::from_utf8(bytes).ok().map(Some)
}

/// The Sentinel part of the settings, checked: `sentinels` and `name` go together, with no
/// other address.
fn sentinel_config(s: &RedisSettings) -> Outcome<Option<SentinelConfig>> {
    let Some(sentinels) = &s.sentinels else {
        let stray = [
            ("name", s.name.is_some()),
            ("sentinelUsername", s.sentinel_username.is_some()),
            ("sentinelPassword", s.sentinel_password.is_some()),
        ];
        return match stray.iter().find(|(_, given)| *given) {
            Some((option, _)) => Err(invalid(format!("`{option}` needs `sentinels`"))),
            None => Ok(None),
        };
    };
    let other = [
        ("url", s.url.is_some()),
        ("host", s.host.is_some()),
        ("port", s.port.is_some()),
        ("path", s.path.is_some()),
        ("cluster", s.cluster.is_some()),
    ];
    if let Some((option, _)) = other.iter().find(|(_, given)| *given) {
        return Err(invalid(format!(
            "`sentinels` cannot be combined with `{option}`: the sentinels name the primary"
        )));
    }
    if sentinels.is_empty() {
        return Err(invalid("`sentinels` must list at least one Sentinel"));
    }
    let Some(name) = s.name.clone() else {
        return Err(Failure::type_error(
            ErrorCode::InvalidOption,
            "`name` is required with `sentinels`: pass the master name the sentinels monitor",
        ));
    };
    if name.is_empty() {
        return Err(invalid("`name` must be a master name, got an empty string"));
    }
    let sentinels = sentinels
        .iter()
        .map(|(host, port)| {
            if host.is_empty() {
                return Err(invalid("`sentinels[].host` must not be empty"));
            }
            let info = (host.as_str(), *port).into_connection_info().map_err(|e| {
                invalid(format!(
                    "a Sentinel's `host` is not valid: {}",
                    e.kind_description()
                ))
            })?;
            let mut redis = info.redis_settings().clone();
            if let Some(username) = &s.sentinel_username {
                redis = redis.set_username(username);
            }
            if let Some(password) = &s.sentinel_password {
                redis = redis.set_password(password);
            }
            Ok(info.set_redis_settings(redis))
        })
        .collect::<Outcome<Vec<_>>>()?;
    Ok(Some(SentinelConfig { name, sentinels }))
}

fn invalid(message: impl Into<String>) -> Failure {
    Failure::range_error(ErrorCode::InvalidOption, message)
}

/// `path` is a whole address: it goes with no other one, nor with TLS.
fn check_path(s: &RedisSettings) -> Outcome<()> {
    let Some(path) = &s.path else {
        return Ok(());
    };
    let other = [
        ("url", s.url.is_some()),
        ("host", s.host.is_some()),
        ("port", s.port.is_some()),
        ("cluster", s.cluster.is_some()),
        ("tls", s.tls == Some(true) || s.tls_options.is_some()),
    ];
    if let Some((name, _)) = other.iter().find(|(_, given)| *given) {
        return Err(invalid(format!(
            "`path` (a unix socket) cannot be combined with `{name}`"
        )));
    }
    if path.is_empty() {
        return Err(invalid(
            "`path` must be a unix socket's path, got an empty string",
        ));
    }
    Ok(())
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
                "`{url_option}` is not a valid Redis URL (redis://, rediss://, redis+unix:// or \
                 redis+sentinel://): {}",
                e.kind_description()
            ))
        })?,
        None if s.path.is_some() => ConnectionAddr::Unix(s.path.clone().unwrap_or_default().into())
            .into_connection_info()
            .map_err(|e| invalid(format!("`path` is not valid: {}", e.kind_description())))?,
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
    let tls = s.tls_options.as_ref();
    if s.tls == Some(true) || tls.is_some() {
        if let ConnectionAddr::Tcp(host, port) = info.addr().clone() {
            info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            });
        }
    }
    match (tls, info.addr().clone()) {
        (
            Some(tls),
            ConnectionAddr::TcpTls {
                host,
                port,
                tls_params,
                ..
            },
        ) => {
            // `rejectUnauthorized: false` accepts any certificate, as in Node.
            let insecure = tls.reject_unauthorized == Some(false);
            info = info.set_addr(ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                tls_params,
            });
            with_certificates(info, tls)
        }
        (Some(_), _) => Err(invalid("`tls` needs a TCP connection (not a unix socket)")),
        (None, _) => Ok(info),
    }
}

/// `info` with the CA and client certificate of `tls`, checked now (bad PEM is an option error).
fn with_certificates(info: ConnectionInfo, tls: &TlsSettings) -> Outcome<ConnectionInfo> {
    let client_tls = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => Some(ClientTlsConfig {
            client_cert: cert.clone(),
            client_key: key.clone(),
        }),
        (None, None) => None,
        _ => return Err(invalid("`tls.cert` and `tls.key` go together")),
    };
    if client_tls.is_none() && tls.ca.is_none() {
        return Ok(info);
    }
    let holds = |pem: &Option<Vec<u8>>, what: &str| {
        pem.as_ref()
            .is_none_or(|pem| String::from_utf8_lossy(pem).contains(what))
    };
    if !holds(&tls.ca, "-----BEGIN CERTIFICATE-----")
        || !holds(&tls.cert, "-----BEGIN CERTIFICATE-----")
        || !holds(&tls.key, "PRIVATE KEY-----")
    {
        return Err(invalid(
            "`tls.ca` and `tls.cert` must hold PEM certificates and `tls.key` a PEM private key",
        ));
    }
    let certificates = TlsCertificates {
        client_tls,
        root_cert: tls.ca.clone(),
    };
    redis::Client::build_with_tls(info, certificates)
        .map(|client| client.get_connection_info().clone())
        .map_err(|e| {
            invalid(format!(
                "`tls` holds a certificate or key that is not valid PEM: {}",
                e.kind_description()
            ))
        })
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
    fn a_path_is_a_unix_socket_alone() {
        let config = RedisConfig::from_settings(RedisSettings {
            path: Some("/tmp/redis.sock".into()),
            password: Some("pw".into()),
            ..settings()
        })
        .unwrap();
        assert_eq!(config.endpoint(), "/tmp/redis.sock");
        assert!(matches!(config.nodes[0].addr(), ConnectionAddr::Unix(_)));
        for other in [
            RedisSettings {
                host: Some("h".into()),
                ..settings()
            },
            RedisSettings {
                url: Some("redis://h".into()),
                ..settings()
            },
            RedisSettings {
                tls: Some(true),
                ..settings()
            },
        ] {
            let err = RedisConfig::from_settings(RedisSettings {
                path: Some("/tmp/redis.sock".into()),
                ..other
            })
            .unwrap_err();
            assert!(err.message.contains("`path`"), "{}", err.message);
        }
    }

    fn sentinel_url(url: &str) -> Outcome<RedisConfig> {
        RedisConfig::from_settings(RedisSettings {
            url: Some(url.into()),
            ..settings()
        })
    }

    #[test]
    fn a_sentinel_url_lists_the_sentinels_and_names_the_master() {
        let config =
            sentinel_url("redis+sentinel://u:p%40ss@10.0.0.1:26380,[::1],s.test/mymaster/3")
                .unwrap();
        let sentinel = config.sentinel.as_ref().unwrap();
        assert_eq!(sentinel.name, "mymaster");
        let sentinels: Vec<String> = sentinel
            .sentinels
            .iter()
            .map(|info| super::super::link::address_of(info.addr()))
            .collect();
        assert_eq!(sentinels, ["10.0.0.1:26380", "::1:26379", "s.test:26379"]);
        let data = config.nodes[0].redis_settings();
        assert_eq!(
            (data.username(), data.password(), data.db()),
            (Some("u"), Some("p@ss"), 3)
        );
        assert!(!config.endpoint().contains("p@ss"));
        let tls = sentinel_tls("rediss+sentinel://10.0.0.1/m");
        assert!(tls);
        for bad in [
            "redis+sentinel://10.0.0.1",
            "redis+sentinel://10.0.0.1:0/m",
            "redis+sentinel://10.0.0.1/m/x",
            "redis+sentinel://10.0.0.1,/m",
            "redis+sentinel://10.0.0.1//",
        ] {
            let err = sentinel_url(bad).unwrap_err();
            assert_eq!(err.code, ErrorCode::InvalidOption, "{bad}");
        }
    }

    fn sentinel_tls(url: &str) -> bool {
        matches!(
            sentinel_url(url).unwrap().nodes[0].addr(),
            ConnectionAddr::TcpTls { .. }
        )
    }

    #[test]
    fn sentinels_need_a_name_and_no_other_address() {
        let with = |extra: RedisSettings| {
            RedisConfig::from_settings(RedisSettings {
                sentinels: Some(vec![("127.0.0.1".into(), 26379)]),
                ..extra
            })
        };
        assert!(with(RedisSettings {
            name: Some("m".into()),
            ..settings()
        })
        .unwrap()
        .is_sentinel());
        assert!(with(settings()).unwrap_err().message.contains("`name`"));
        for other in [
            RedisSettings {
                host: Some("h".into()),
                ..settings()
            },
            RedisSettings {
                cluster: Some(vec!["redis://h".into()]),
                ..settings()
            },
            RedisSettings {
                path: Some("/tmp/s".into()),
                ..settings()
            },
        ] {
            let err = with(RedisSettings {
                name: Some("m".into()),
                ..other
            })
            .unwrap_err();
            assert!(err.message.contains("`sentinels`"), "{}", err.message);
        }
        let err = RedisConfig::from_settings(RedisSettings {
            name: Some("m".into()),
            ..settings()
        })
        .unwrap_err();
        assert!(err.message.contains("needs `sentinels`"), "{}", err.message);
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
