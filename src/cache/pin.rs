//! Whether a chain's upstream reads EIP-1898's `{blockHash}` form ([`PinForm`]): the read cache
//! asks a read about an unfinalized block by number of that block by its hash
//! ([`super::ReadCache::pin`]), and stops when the upstream refuses the form (each such read would
//! otherwise cost two asks). A client's malformed params are refused with the same words
//! (-32602, "invalid argument"), so a refusal counts only when a probe of the same form with
//! params known good (`eth_getBalance` of the zero address at the head's hash) is refused too;
//! and pinning that stopped is tried again after [`PIN_RETRY_MS`]. Pure and clock-free.

/// After this many refusals in a row that a probe confirmed, the chain's reads by number are
/// asked as they are.
pub const PIN_REFUSALS: u32 = 3;

/// How long a probe's verdict stands, ms: refusals within it are judged by it, not probed again
/// (a client sending malformed reads costs one probe per this long at most).
pub const PIN_PROBE_MS: u64 = 10_000;

/// How long pinning stays off after [`PIN_REFUSALS`], ms: then one read is asked by hash again
/// (an upstream replaced behind its URL, a node upgraded).
pub const PIN_RETRY_MS: u64 = 600_000;

/// The probe of the form: `eth_getBalance` of the zero address at `hash` (the head's), with
/// `requireCanonical` as the pinned reads ask.
pub fn probe_params(hash: &str) -> serde_json::Value {
    serde_json::json!([
        "0x0000000000000000000000000000000000000000",
        { "blockHash": hash, "requireCanonical": true }
    ])
}

/// One chain's record of its upstream's reading of the form.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PinForm {
    /// Refusals in a row, each confirmed by a probe.
    refusals: u32,
    /// When pinning stopped ([`PIN_REFUSALS`] reached), ms.
    off_since_ms: Option<u64>,
    /// The last probe: when, ms, and whether the form was read.
    probed: Option<(u64, bool)>,
}

/// What to do with a refusal of a pinned read ([`PinForm::refused`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No probe stands: probe the form ([`probe_params`]), then [`PinForm::probed`].
    Probe,
    /// Judged by the probe that stands: counted when it was refused too; `read`: whether it
    /// read the form (then the client's params were refused).
    Judged {
        /// The standing probe's verdict.
        read: bool,
    },
}

impl PinForm {
    /// Whether reads are asked by hash at `now_ms`: not after [`PIN_REFUSALS`] confirmed
    /// refusals, until [`PIN_RETRY_MS`] has passed (then one more refusal stops it again).
    pub fn on(&self, now_ms: u64) -> bool {
        self.off_since_ms
            .is_none_or(|since| now_ms.saturating_sub(since) >= PIN_RETRY_MS)
    }

    /// A pinned read was answered by hash: the form is read.
    pub fn answered(&mut self) {
        self.refusals = 0;
        self.off_since_ms = None;
    }

    /// A pinned read was refused as a form not read, at `now_ms`: judged by the standing probe
    /// (a refusal it confirms counts), or a probe is wanted.
    pub fn refused(&mut self, now_ms: u64) -> Refusal {
        match self.probed {
            Some((at, read)) if now_ms.saturating_sub(at) < PIN_PROBE_MS => {
                if !read {
                    self.count(now_ms);
                }
                Refusal::Judged { read }
            }
            _ => Refusal::Probe,
        }
    }

    /// The probe's verdict at `now_ms`: `read` (the form answered) or refused too (the refusal
    /// that asked for it counts).
    pub fn probed(&mut self, read: bool, now_ms: u64) {
        self.probed = Some((now_ms, read));
        if read {
            self.refusals = 0;
        } else {
            self.count(now_ms);
        }
    }

    /// Counts a confirmed refusal at `now_ms`; once pinning was tried again after
    /// [`PIN_RETRY_MS`], one stops it again.
    fn count(&mut self, now_ms: u64) {
        self.refusals = self.refusals.saturating_add(1);
        let retried = self.on(now_ms) && self.off_since_ms.is_some();
        if retried || (self.refusals >= PIN_REFUSALS && self.off_since_ms.is_none()) {
            self.off_since_ms = Some(now_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_clients_bad_params_do_not_stop_pinning_when_the_probe_is_answered() {
        // Tried (issue 51): three reads with a malformed address stopped pinning for good.
        let mut form = PinForm::default();
        for at in [0, 1, 2, 3, 4] {
            match form.refused(at) {
                Refusal::Probe => form.probed(true, at),
                Refusal::Judged { read } => assert!(read),
            }
        }
        assert!(
            form.on(5),
            "the probe read the form: the client's params were bad"
        );
    }

    #[test]
    fn refusals_a_probe_confirms_stop_pinning_and_it_is_tried_again_later() {
        let mut form = PinForm::default();
        assert_eq!(form.refused(0), Refusal::Probe);
        form.probed(false, 0);
        assert_eq!(form.refused(1), Refusal::Judged { read: false });
        assert!(form.on(2), "two in a row");
        assert_eq!(form.refused(3), Refusal::Judged { read: false });
        assert!(!form.on(4), "three: off");
        assert!(!form.on(PIN_RETRY_MS - 1));
        assert!(form.on(3 + PIN_RETRY_MS), "tried again after PIN_RETRY_MS");
        // One more refusal (the probe long gone: probed again, refused) stops it again.
        let at = 4 + PIN_RETRY_MS;
        assert_eq!(form.refused(at), Refusal::Probe);
        form.probed(false, at);
        assert!(!form.on(at + 1));
        // An answer by hash starts the count again.
        let mut answered = PinForm::default();
        answered.probed(false, 0);
        answered.answered();
        answered.probed(false, PIN_PROBE_MS);
        answered.probed(false, 2 * PIN_PROBE_MS);
        assert!(answered.on(2 * PIN_PROBE_MS + 1));
    }
}
