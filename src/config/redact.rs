//! Keeping the upstream URL, and the parts of it that may be secret (credentials, API keys in the
//! path or query), out of every answer and log line.

use super::Config;

impl Config {
    /// `text` with every appearance of the upstream URL and of its parts that may be secret
    /// replaced by `[upstream]`: the URL, its authority (with any user and password), its host,
    /// and its path segments and query values of 8 characters or more (API keys). For error
    /// messages from the platform and upstream answers that may quote them.
    pub fn redact(&self, text: &str) -> String {
        self.redact_cow(text).into_owned()
    }

    /// [`Config::redact`], without a copy when nothing is to be redacted (the usual case, for
    /// every upstream answer).
    pub fn redact_cow<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        if !self.secrets.iter().any(|s| text.contains(s.as_str())) {
            return std::borrow::Cow::Borrowed(text);
        }
        let mut out = text.to_string();
        for secret in &self.secrets {
            out = out.replace(secret.as_str(), "[upstream]");
        }
        std::borrow::Cow::Owned(out)
    }
}

/// The parts of every upstream URL and of the status URL that must not be shown, longest first.
pub(super) fn secrets_of_all(urls: &[String], status_urls: &[String]) -> Vec<String> {
    let mut secrets: Vec<String> = urls.iter().flat_map(|u| secrets_of(u)).collect();
    secrets.extend(status_urls.iter().flat_map(|u| status_secrets_of(u)));
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
    secrets
}

/// The host and port of `url`, without credentials, path or query.
pub(super) fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    authority.rsplit('@').next().unwrap_or_default()
}

/// The parts of the upstream URL that must not be shown, longest first.
pub(super) fn secrets_of(url: &str) -> Vec<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    let host_port = authority.rsplit('@').next().unwrap_or_default();
    let host = host_port.rsplit_once(':').map_or(host_port, |(h, _)| h);
    let mut secrets: Vec<String> = vec![url.to_string(), url.trim_end_matches('/').to_string()];
    secrets.extend([authority, host_port, host].iter().map(|s| s.to_string()));
    if let Some((userinfo, _)) = authority.rsplit_once('@') {
        secrets.extend(userinfo.split(':').map(str::to_string));
    }
    secrets.extend(
        tail.split(['/', '?', '#', '&', '='])
            .filter(|part| part.len() >= 8)
            .map(str::to_string),
    );
    secrets.retain(|s| s.len() >= 4);
    secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    secrets.dedup();
    secrets
}

/// The parts of a status URL (`SEND_STATUS_URL`) that must not be shown: as [`secrets_of`], but
/// without path segments that are plain words (`transaction` in Merkle's
/// `/transaction/{hash}`): redacting those from every upstream answer would change what the
/// relay reads in them ("transaction underpriced").
pub(super) fn status_secrets_of(url: &str) -> Vec<String> {
    let plain_word = |s: &String| {
        s.chars()
            .all(|c| c.is_ascii_lowercase() || c == '_' || c == '-')
    };
    secrets_of(url)
        .into_iter()
        .filter(|s| !plain_word(s))
        .collect()
}
