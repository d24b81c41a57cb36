//! The value of `CHAINS` ([`crate::config::settings::CHAINS`]): the chains a deployment serves
//! beside its default one, each an id and an optional alias. Read by the settings table, served by
//! [`crate::config::chains`].

/// One chain of `CHAINS`: `8453` or `8453:base`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainEntry {
    /// Its chain id (EIP-155).
    pub id: u64,
    /// Its alias in paths (`/evm/base`): lowercase letters, digits and `-`, not only digits.
    pub alias: Option<String>,
}

/// Reads `CHAINS`: comma-separated `id` or `id:alias`, ids decimal, each id and alias once.
///
/// # Errors
/// The problem, said after the setting's name.
pub fn parse_entries(v: &str) -> Result<Vec<ChainEntry>, String> {
    let mut entries: Vec<ChainEntry> = Vec::new();
    for item in v.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (id, alias) = match item.split_once(':') {
            Some((id, alias)) => (id.trim(), Some(alias.trim().to_ascii_lowercase())),
            None => (item, None),
        };
        let id: u64 = id.parse().ok().filter(|&id| id > 0).ok_or_else(|| {
            format!("must list decimal chain ids, each `id` or `id:alias`, got {item:?}")
        })?;
        if let Some(alias) = &alias {
            let fits = !alias.is_empty()
                && alias.len() <= 64
                && alias
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                && !alias.chars().all(|c| c.is_ascii_digit());
            if !fits {
                return Err(format!(
                    "aliases are lowercase letters, digits and -, not only digits, got {item:?}"
                ));
            }
        }
        let twice = entries
            .iter()
            .any(|e| e.id == id || (alias.is_some() && e.alias == alias));
        if twice {
            return Err(format!("lists a chain id or alias twice: {item:?}"));
        }
        entries.push(ChainEntry { id, alias });
    }
    Ok(entries)
}
