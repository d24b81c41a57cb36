//! CORS (the Fetch standard's CORS protocol) for browser dapps: which origins may read the
//! relay's answers (`CORS_ORIGINS`), the headers every answer carries, and the answer to a
//! preflight (`OPTIONS`).

/// Methods a browser may use (`Access-Control-Allow-Methods`).
pub const ALLOW_METHODS: &str = "POST, GET, OPTIONS";
/// Request headers a browser may send (`Access-Control-Allow-Headers`): what viem
/// (`Content-Type`) and ethers v6 (`content-type`, and `authorization` for URL credentials) send,
/// `x-request-id`, and `cache-control` (`no-cache`: the read cache is passed by, README "Cache").
pub const ALLOW_HEADERS: &str = "content-type, authorization, x-request-id, cache-control";
/// Response headers a page's script may read (`Access-Control-Expose-Headers`).
pub const EXPOSE_HEADERS: &str = "x-request-id, retry-after, x-public-after-blocks, x-cache";
/// How long a browser may cache a preflight, s (`Access-Control-Max-Age`; browsers cap it: Chromium
/// at 7,200 s).
pub const MAX_AGE_S: u32 = 86_400;

/// `CORS_ORIGINS`: who may read answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorsOrigins {
    /// `*` (the default): any origin.
    Any,
    /// A comma-separated list of origins (`https://app.example`); a matching request origin is
    /// echoed, with `Vary: Origin`.
    List(Vec<String>),
}

impl CorsOrigins {
    /// Reads `CORS_ORIGINS`: unset or `*` is [`CorsOrigins::Any`], anything else a list
    /// (trailing slashes ignored, compared case-insensitively).
    pub fn parse(value: Option<&str>) -> Self {
        match value.map(str::trim) {
            None | Some("") | Some("*") => CorsOrigins::Any,
            Some(list) => CorsOrigins::List(
                list.split(',')
                    .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
                    .filter(|o| !o.is_empty())
                    .collect(),
            ),
        }
    }

    /// Whether a page of `origin` may use the relay: any origin under `*`, a listed one
    /// otherwise. WebSocket upgrades, which CORS does not cover, from an origin not allowed get
    /// HTTP 403 (a request without `Origin` is not a browser page's and is allowed).
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            CorsOrigins::Any => true,
            CorsOrigins::List(allowed) => {
                allowed.contains(&origin.trim_end_matches('/').to_ascii_lowercase())
            }
        }
    }

    /// The CORS headers of every answer to a request from `origin` (its `Origin` header).
    pub fn headers(&self, origin: Option<&str>) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        match self {
            CorsOrigins::Any => out.push(("access-control-allow-origin", "*".to_string())),
            CorsOrigins::List(_) => {
                if let Some(origin) = origin.filter(|o| self.allows(o)) {
                    out.push(("access-control-allow-origin", origin.to_string()));
                }
                out.push(("vary", "Origin".to_string()));
            }
        }
        out.push(("access-control-expose-headers", EXPOSE_HEADERS.to_string()));
        out
    }

    /// The headers of the answer (HTTP 204) to a preflight from `origin`.
    pub fn preflight(&self, origin: Option<&str>) -> Vec<(&'static str, String)> {
        let mut out = self.headers(origin);
        out.push(("access-control-allow-methods", ALLOW_METHODS.to_string()));
        out.push(("access-control-allow-headers", ALLOW_HEADERS.to_string()));
        out.push(("access-control-max-age", MAX_AGE_S.to_string()));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get<'a>(headers: &'a [(&str, String)], name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn any_origin_by_default() {
        let cors = CorsOrigins::parse(None);
        assert_eq!(cors, CorsOrigins::Any);
        let h = cors.headers(Some("https://dapp.example"));
        assert_eq!(get(&h, "access-control-allow-origin"), Some("*"));
        assert_eq!(get(&h, "vary"), None);
        let p = cors.preflight(None);
        assert_eq!(
            get(&p, "access-control-allow-methods"),
            Some("POST, GET, OPTIONS")
        );
        assert!(get(&p, "access-control-allow-headers")
            .unwrap()
            .contains("content-type"));
        assert_eq!(get(&p, "access-control-max-age"), Some("86400"));
    }

    #[test]
    fn a_list_echoes_a_matching_origin_and_varies() {
        let cors = CorsOrigins::parse(Some("https://a.example, https://B.example/"));
        let h = cors.headers(Some("https://b.example"));
        assert_eq!(
            get(&h, "access-control-allow-origin"),
            Some("https://b.example")
        );
        assert_eq!(get(&h, "vary"), Some("Origin"));
        assert!(cors.allows("https://B.example") && cors.allows("https://a.example/"));
        assert!(!cors.allows("https://evil.example") && CorsOrigins::Any.allows("https://x"));
        let other = cors.headers(Some("https://evil.example"));
        assert_eq!(get(&other, "access-control-allow-origin"), None);
        assert_eq!(get(&other, "vary"), Some("Origin"));
        assert_eq!(
            get(&cors.headers(None), "access-control-allow-origin"),
            None
        );
    }
}
