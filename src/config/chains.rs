//! The chains one deployment serves: the default chain (`CHAIN_ID` and the top-level settings,
//! at `/` and `/evm/{CHAIN_ID}`) and each chain of `CHAINS` at `/evm/{chainId}` or its alias,
//! with its own settings ([`Config::for_chain`]). One chain's bad setting is that chain's error
//! ([`Served::config`]); the others serve. eRPC serves `/{project}/evm/{chainId}` with network
//! aliases; Cloudflare's Ethereum gateway `/v1/mainnet`.

pub use super::chain_entry::{parse_entries, ChainEntry};
use super::{settings, Config, ConfigError};
use std::rc::Rc;

/// The name of `sender`'s Durable Object: the lowercase address alone on the default chain
/// (`chain` `None`, as before chains), `{id}:{address}` on served chain `id`.
pub fn object_name(chain: Option<u64>, sender: &str) -> String {
    match chain {
        None => sender.to_string(),
        Some(id) => format!("{id}:{sender}"),
    }
}

/// An object's name ([`object_name`]) taken apart: its chain part (`None` on the default
/// chain) and its sender.
pub fn split_object_name(name: &str) -> (Option<&str>, &str) {
    match name.split_once(':') {
        Some((chain, sender)) => (Some(chain), sender),
        None => (None, name),
    }
}

/// One chain served at `/evm/{id}`.
#[derive(Debug, Clone)]
pub struct Served {
    /// Its chain id.
    pub id: u64,
    /// Its alias, if `CHAINS` gives one.
    pub alias: Option<String>,
    /// Its settings, or the error that keeps it from serving (that chain's alone).
    pub config: Result<Rc<Config>, ConfigError>,
}

/// The chains of a deployment ([`Chains::from_lookup`]).
#[derive(Debug, Clone)]
pub struct Chains {
    /// The default chain's settings (`/` and today's paths), or their error.
    pub default: Result<Rc<Config>, ConfigError>,
    /// The chains served at `/evm/{id}`: the default chain first when `CHAIN_ID` is set (its
    /// alias from `CHAINS` if listed there), then the others of `CHAINS` in their order.
    pub served: Vec<Served>,
    /// What the operator is told once per isolate ([`Chains::notices`]).
    pub notices: Vec<String>,
}

impl Chains {
    /// Reads every chain's settings through `get` (the variable's value, `None` when unset).
    ///
    /// # Errors
    /// Only a deployment's error: `CHAINS` unreadable, or set without `CHAIN_ID` (the default
    /// chain must have an id when others are served beside it). A chain's own error is kept in
    /// its [`Served::config`].
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Chains, ConfigError> {
        let entries = settings::CHAINS.read(&settings::Vars::top(&get))?;
        let default = Config::from_lookup(&get).map(Rc::new);
        let default_id = match settings::CHAIN_ID.read(&settings::Vars::top(&get)) {
            Ok(id) => id,
            // Beside other chains a bad CHAIN_ID is the deployment's error, said as it is.
            Err(e) if !entries.is_empty() => return Err(e),
            Err(_) => None,
        };
        if !entries.is_empty() && default_id.is_none() {
            return Err(ConfigError::new(
                "CHAINS",
                "needs CHAIN_ID: the default chain's id, served at / and /evm/{CHAIN_ID}",
            ));
        }
        let mut served = Vec::new();
        if let Some(id) = default_id {
            let alias = entries
                .iter()
                .find(|e| e.id == id)
                .and_then(|e| e.alias.clone());
            served.push(Served {
                id,
                alias,
                config: default.clone(),
            });
        }
        for entry in entries.into_iter().filter(|e| Some(e.id) != default_id) {
            served.push(Served {
                id: entry.id,
                alias: entry.alias,
                config: Config::for_chain(&get, entry.id).map(Rc::new),
            });
        }
        // The default chain is served first when there are others.
        let notices = Self::notices(&get, served.get(1..).unwrap_or_default());
        Ok(Chains {
            default,
            served,
            notices,
        })
    }

    /// What a deployment that relied on the old inheritance is told, one line per chain of
    /// `others` (the served chains but the default) and setting of
    /// [`settings::NO_LONGER_INHERITED`] set at the top level and not for that chain: it now
    /// keeps its own default there. Names and chain ids only, never a value.
    pub fn notices(get: &impl Fn(&str) -> Option<String>, others: &[Served]) -> Vec<String> {
        let set = |name: &str| get(name).is_some_and(|v| !v.trim().is_empty());
        let mut notices = Vec::new();
        for about in settings::NO_LONGER_INHERITED {
            if !set(about.name) {
                continue;
            }
            for chain in others {
                let own = format!("CHAIN_{}_{}", chain.id, about.name);
                if !set(&own) {
                    notices.push(format!(
                        "{name} is set at the top level, which is the default chain's alone since \
                         this release: chain {id} now has {default} (set {own} to keep the old \
                         value there)",
                        name = about.name,
                        id = chain.id,
                        default = about.default.replace('`', ""),
                    ));
                }
            }
        }
        notices
    }

    /// Holds the variables the deployment sets (`names`, every one of them) to what a chain
    /// reads: a `CHAIN_<id>_NAME` of a chain served whose `NAME` is no setting of a chain (a
    /// typo, or a deployment's setting such as `MAX_BATCH`) is that chain's error, never
    /// ignored; the default chain's (`CHAIN_<CHAIN_ID>_NAME`) too, since it reads the top-level
    /// `NAME` instead. A chain not served is not asked (a chain taken out of `CHAINS` may leave
    /// its secrets behind).
    pub fn check_names(mut self, names: &[String]) -> Chains {
        for name in names {
            let Some(rest) = name.strip_prefix("CHAIN_") else {
                continue;
            };
            let Some((id, setting)) = rest.split_once('_') else {
                continue;
            };
            let Ok(id) = id.parse::<u64>() else {
                continue;
            };
            let Some(at) = self.served.iter().position(|c| c.id == id) else {
                continue;
            };
            // The default chain is served first (`CHAINS` needs `CHAIN_ID`).
            let default = at == 0;
            let problem = match settings::SETTINGS.iter().find(|s| s.name == setting) {
                _ if default => format!(
                    "{name} is set, but chain {id} is the default chain (CHAIN_ID): set {setting} \
                     instead"
                ),
                Some(about) if about.scope == settings::Scope::Deployment => format!(
                    "{name} is set, but {setting} is the deployment's, not a chain's: set {setting}"
                ),
                Some(about) if about.name == settings::CHAIN_ID.about.name => {
                    format!("{name} is set, but a served chain's id is the one CHAINS lists")
                }
                Some(_) => continue,
                None => format!(
                    "{name} is set, but {setting} is no setting (README, Settings, \"per chain\")"
                ),
            };
            let error = ConfigError {
                name: "CHAINS",
                chain: Some(id),
                problem,
            };
            if default {
                self.default = Err(error.clone());
            }
            self.served[at].config = Err(error);
        }
        self
    }

    /// The chain a path segment names (`/evm/{segment}`): by decimal chain id or alias.
    pub fn find(&self, segment: &str) -> Option<&Served> {
        let segment = segment.to_ascii_lowercase();
        self.served
            .iter()
            .find(|c| c.id.to_string() == segment || c.alias.as_deref() == Some(segment.as_str()))
    }

    /// The settings of the chain whose senders' Durable Object is named `name` (`{id}:{sender}`
    /// for a served chain, the sender's address alone for the default chain); `None` when the
    /// name's chain is not served.
    pub fn of_object(&self, name: &str) -> Option<&Result<Rc<Config>, ConfigError>> {
        match split_object_name(name).0 {
            None => Some(&self.default),
            Some(id) => {
                let id: u64 = id.parse().ok()?;
                self.served.iter().find(|c| c.id == id).map(|c| &c.config)
            }
        }
    }

    /// The chains served, for a client that named another: `[{"chainId": 1, "path": "/evm/1",
    /// "alias": "/evm/ethereum"}, ...]` (`alias` only where there is one).
    pub fn listing(&self) -> serde_json::Value {
        self.served
            .iter()
            .map(|c| {
                let mut entry =
                    serde_json::json!({ "chainId": c.id, "path": format!("/evm/{}", c.id) });
                if let Some(alias) = &c.alias {
                    entry["alias"] = format!("/evm/{alias}").into();
                }
                entry
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
