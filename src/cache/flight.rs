//! What is in flight ([`Flights`]): identical reads, one of which asks the upstream while the
//! others wait for its answer, and each chain's head ask, one at a time. Pure and clock-free.

use crate::jsonrpc::Answer;
use std::collections::HashMap;

/// An identical read in flight: since when, and its answer once it landed (`None` inside: it
/// failed or was abandoned, and each waiter asks for itself).
struct Flight {
    since_ms: u64,
    landed: Option<Option<Answer>>,
}

/// Whether a read leads (asks the upstream) or follows one in flight ([`Flights::begin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Begin {
    /// Ask the upstream, then [`Flights::land`] the answer.
    Lead,
    /// Wait for the leader's answer ([`Flights::landed`]).
    Follow,
}

/// The reads and head asks in flight of one isolate.
#[derive(Default)]
pub struct Flights {
    reads: HashMap<(u64, String), Flight>,
    /// The chains whose head is being asked, since when, ms.
    refreshing: HashMap<u64, u64>,
}

impl Flights {
    /// Claims `chain`'s head ask at `now_ms`: true when no other is under way (or the one under
    /// way began more than `give_up_ms` ago); the claimer asks, then
    /// [`ReadCache::release_refresh`].
    pub fn claim_refresh(&mut self, chain: u64, now_ms: u64, give_up_ms: u64) -> bool {
        match self.refreshing.get(&chain) {
            Some(&since) if now_ms.saturating_sub(since) < give_up_ms => false,
            _ => {
                self.refreshing.insert(chain, now_ms);
                true
            }
        }
    }

    /// Ends `chain`'s head ask.
    pub fn release_refresh(&mut self, chain: u64) {
        self.refreshing.remove(&chain);
    }

    /// Whether `chain`'s head ask is under way.
    pub fn refreshing(&self, chain: u64) -> bool {
        self.refreshing.contains_key(&chain)
    }

    /// Starts a read of `key` on `chain` at `now_ms`: it follows an identical read in flight
    /// that began less than `give_up_ms` ago, else it leads.
    pub fn begin(&mut self, chain: u64, key: &str, now_ms: u64, give_up_ms: u64) -> Begin {
        let id = (chain, key.to_string());
        if let Some(flight) = self.reads.get(&id) {
            if flight.landed.is_none() && now_ms.saturating_sub(flight.since_ms) < give_up_ms {
                return Begin::Follow;
            }
        }
        // Landed flights are kept a moment for their followers to read, then go.
        if self.reads.len() >= 64 {
            self.reads
                .retain(|_, f| f.landed.is_none() || now_ms.saturating_sub(f.since_ms) < 1_000);
        }
        self.reads.insert(
            id,
            Flight {
                since_ms: now_ms,
                landed: None,
            },
        );
        Begin::Lead
    }

    /// The leader's `answer` to `key` on `chain` (`None`: it failed or gave up, each follower
    /// asks for itself).
    pub fn land(&mut self, chain: u64, key: &str, answer: Option<Answer>) {
        if let Some(flight) = self.reads.get_mut(&(chain, key.to_string())) {
            flight.landed = Some(answer);
        }
    }

    /// For a follower: the leader's answer once it landed (`Some(None)`: ask for yourself, also
    /// when the flight is gone); `None` while it is in flight.
    pub fn landed(&self, chain: u64, key: &str) -> Option<Option<Answer>> {
        match self.reads.get(&(chain, key.to_string())) {
            Some(flight) => flight.landed.clone(),
            None => Some(None),
        }
    }
}
