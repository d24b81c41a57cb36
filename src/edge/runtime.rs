//! What the Worker and the Durable Object share on the platform: the settings from the
//! environment, the clock, and metrics as log lines and Analytics Engine data points.

use crate::chain_id::ChainIdCache;
use crate::config::chains::Chains;
use crate::config::ConfigError;
use crate::metrics::Metric;
use std::rc::Rc;
use worker::wasm_bindgen::{JsCast, JsValue};
use worker::wasm_bindgen_futures::JsFuture;
use worker::{console_log, js_sys, web_sys, AnalyticsEngineDataPointBuilder, Env};

thread_local! {
    /// The chain id learned from the upstreams, for this isolate's lifetime.
    static CHAIN_IDS: Rc<ChainIdCache> = Rc::new(ChainIdCache::new());
}

/// The isolate's chain id, as the relay and the rotation's chain checks learn it.
pub fn chain_ids() -> Rc<ChainIdCache> {
    CHAIN_IDS.with(Rc::clone)
}

/// The Analytics Engine dataset binding for metrics (optional).
pub const METRICS_BINDING: &str = "METRICS";

/// Records `metric` of chain `chain` (the chain id served, `None` while the default chain's is
/// not yet learned), with the `request_id` of the request it belongs to when there is one: always
/// a JSON log line (with `chain`); a data point too when `METRICS` is bound (blob3 = the chain
/// id, empty when unknown).
pub fn emit(env: &Env, chain: Option<u64>, metric: &Metric, request_id: Option<&str>) {
    let mut line = metric.clone();
    if let Some(chain) = chain {
        line = line.field("chain", chain);
    }
    if let Some(id) = request_id {
        line = line.field("request_id", id);
    }
    console_log!("{}", line.log_line());
    if let Ok(dataset) = env.analytics_engine(METRICS_BINDING) {
        let chain_blob = chain.map(|c| c.to_string()).unwrap_or_default();
        let written = AnalyticsEngineDataPointBuilder::new()
            .indexes([metric.index()])
            .blobs([metric.event, metric.label.as_str(), chain_blob.as_str()])
            .doubles(metric.doubles())
            .write_to(&dataset);
        if let Err(e) = written {
            console_log!(
                "{}",
                crate::log::line(
                    "metrics_error",
                    &[("chain", chain.into()), ("error", e.to_string().into())]
                )
            );
        }
    }
}

/// The chain id `config` serves: its `CHAIN_ID` (a served chain's is its id), or the one the
/// isolate learned for the default chain; `None` while unknown.
pub fn chain_of(config: &crate::config::Config) -> Option<u64> {
    config.chain_id.or_else(|| chain_ids().known())
}

/// The time, Unix ms. The Workers clock advances across I/O, not while code computes.
pub fn now_ms() -> u64 {
    worker::Date::now().as_millis()
}

/// Reads every chain's settings ([`Chains`]) from the Worker's vars and secrets, every
/// `CHAIN_<id>_NAME` held to what a chain reads ([`Chains::check_names`]).
///
/// # Errors
/// The deployment's own ([`Chains::from_lookup`]).
pub fn chains_from_env(env: &Env) -> Result<Chains, ConfigError> {
    let chains = Chains::from_lookup(|name| {
        env.secret(name)
            .ok()
            .map(|s| s.to_string())
            .or_else(|| env.var(name).ok().map(|v| v.to_string()))
    })?;
    // Every variable and binding the deployment has, for the chains' own to be checked.
    let names: Vec<String> = js_sys::Object::keys(env.unchecked_ref::<js_sys::Object>())
        .iter()
        .filter_map(|name| name.as_string())
        .collect();
    Ok(chains.check_names(&names))
}

/// A response's whole body as text, in one `text()` call (workers-rs's `Response::text` reads the
/// body's stream chunk by chunk). Errors: the runtime's, when the body can't be read.
pub async fn whole_text(response: &web_sys::Response) -> Result<String, JsValue> {
    let text = JsFuture::from(response.text()?).await?;
    Ok(text.as_string().unwrap_or_default())
}

thread_local! {
    /// The Worker isolate's read cache: every chain's answers, `CACHE_MAX_BYTES` of them.
    static READ_CACHE: std::cell::OnceCell<std::rc::Rc<std::cell::RefCell<crate::cache::ReadCache>>> =
        const { std::cell::OnceCell::new() };
}

/// The Worker isolate's read cache ([`crate::cache::ReadCache`]), made at its first read with
/// `CACHE_MAX_BYTES` (a deployment setting: every chain's config has the same).
pub fn read_cache(
    config: &crate::config::Config,
) -> std::rc::Rc<std::cell::RefCell<crate::cache::ReadCache>> {
    READ_CACHE.with(|cell| {
        cell.get_or_init(|| {
            std::rc::Rc::new(std::cell::RefCell::new(crate::cache::ReadCache::new(
                config.cache_max_bytes,
            )))
        })
        .clone()
    })
}
