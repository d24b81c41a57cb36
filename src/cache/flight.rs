//! What is in flight ([`Flights`]): identical reads, one of which asks the upstream while the
//! others wait for its answer, and each chain's head ask, one at a time. Pure and clock-free.

use crate::jsonrpc::Answer;
use std::collections::HashMap;

/// What wakes a follower when the read it waits for lands ([`Flights::on_land`]): the platform's
/// own signal (on workerd, a promise the follower's request created, so that its continuation
/// runs in that request's I/O context), called once.
pub type Wake = Box<dyn FnOnce()>;

/// An identical read in flight: since when, the followers waiting for it, what wakes them, and
/// its answer once it landed (`None` inside: it failed or was abandoned, and each waiter asks
/// for itself), kept only while a follower has yet to take it.
struct Flight {
    since_ms: u64,
    waiting: u32,
    wakes: Vec<Wake>,
    landed: Option<(u64, Option<Answer>)>,
}

/// How long a landed answer waits for followers that never came for it (their requests were
/// cancelled), ms: the followers look every few ms.
const LANDED_KEPT_MS: u64 = 1_000;

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
    /// What wakes the reads waiting for a chain's head ask ([`Flights::on_refreshed`]).
    refresh_wakes: HashMap<u64, Vec<Wake>>,
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

    /// Ends `chain`'s head ask claimed at `since_ms` (a later claim, made once this one was
    /// given up on, stays).
    pub fn release_refresh(&mut self, chain: u64, since_ms: u64) {
        if self.refreshing.get(&chain) == Some(&since_ms) {
            self.refreshing.remove(&chain);
            for wake in self.refresh_wakes.remove(&chain).unwrap_or_default() {
                wake();
            }
        }
    }

    /// Calls `wake` when `chain`'s head ask under way ends; at once when none is.
    pub fn on_refreshed(&mut self, chain: u64, wake: Wake) {
        if self.refreshing.contains_key(&chain) {
            self.refresh_wakes.entry(chain).or_default().push(wake);
        } else {
            wake();
        }
    }

    /// Whether `chain`'s head ask is under way.
    pub fn refreshing(&self, chain: u64) -> bool {
        self.refreshing.contains_key(&chain)
    }

    /// Starts a read of `key` on `chain` at `now_ms`: it follows an identical read in flight
    /// that began less than `give_up_ms` ago, else it leads.
    pub fn begin(&mut self, chain: u64, key: &str, now_ms: u64, give_up_ms: u64) -> Begin {
        // A landed answer no follower came for goes (its memory is outside the cache's bound).
        self.reads.retain(|_, f| {
            f.landed
                .as_ref()
                .is_none_or(|(at, _)| now_ms.saturating_sub(*at) < LANDED_KEPT_MS)
        });
        let id = (chain, key.to_string());
        if let Some(flight) = self.reads.get_mut(&id) {
            if flight.landed.is_none() && now_ms.saturating_sub(flight.since_ms) < give_up_ms {
                flight.waiting += 1;
                return Begin::Follow;
            }
        }
        self.reads.insert(
            id,
            Flight {
                since_ms: now_ms,
                waiting: 0,
                wakes: Vec::new(),
                landed: None,
            },
        );
        Begin::Lead
    }

    /// The leader's `answer` to `key` on `chain` at `now_ms` (`None`: it failed or gave up, each
    /// follower asks for itself); kept only while followers wait for it. Returns it when none
    /// does.
    pub fn land(
        &mut self,
        chain: u64,
        key: &str,
        answer: Option<Answer>,
        now_ms: u64,
    ) -> Option<Answer> {
        let id = (chain, key.to_string());
        match self.reads.get_mut(&id) {
            Some(flight) if flight.waiting > 0 => {
                flight.landed = Some((now_ms, answer));
                for wake in flight.wakes.drain(..) {
                    wake();
                }
                None
            }
            Some(_) => {
                self.reads.remove(&id);
                answer
            }
            None => answer,
        }
    }

    /// How many followers wait for `key` on `chain`.
    pub fn followers(&self, chain: u64, key: &str) -> u32 {
        self.reads
            .get(&(chain, key.to_string()))
            .map_or(0, |f| f.waiting)
    }

    /// For a follower of `key` on `chain`: calls `wake` when the leader's answer lands (at once
    /// when it landed already, or the flight is gone).
    pub fn on_land(&mut self, chain: u64, key: &str, wake: Wake) {
        match self.reads.get_mut(&(chain, key.to_string())) {
            Some(flight) if flight.landed.is_none() => flight.wakes.push(wake),
            _ => wake(),
        }
    }

    /// For a follower: takes the leader's answer once it landed (`Some(None)`: ask for
    /// yourself, also when the flight is gone); `None` while it is in flight. The last follower
    /// to take it frees it.
    pub fn take_landed(&mut self, chain: u64, key: &str) -> Option<Option<Answer>> {
        let id = (chain, key.to_string());
        let Some(flight) = self.reads.get_mut(&id) else {
            return Some(None);
        };
        let (_, answer) = flight.landed.as_ref()?;
        let answer = answer.clone();
        flight.waiting = flight.waiting.saturating_sub(1);
        if flight.waiting == 0 {
            self.reads.remove(&id);
        }
        Some(answer)
    }

    /// A follower gives up waiting (the leader took too long): it is no longer counted.
    pub fn leave(&mut self, chain: u64, key: &str) {
        if let Some(flight) = self.reads.get_mut(&(chain, key.to_string())) {
            flight.waiting = flight.waiting.saturating_sub(1);
        }
    }

    /// How many reads are in flight or landed and not yet taken.
    pub fn count(&self) -> usize {
        self.reads.len()
    }
}
