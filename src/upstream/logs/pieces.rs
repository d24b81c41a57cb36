//! A block range cut into aligned power-of-two pieces ([`pieces`]): each piece starts at a
//! multiple of its size, so every client with the same filter asks the same pieces (and the read
//! cache keeps them once), no block outside the range is asked, and a range needs at most about
//! `2 * log2(cap)` edge pieces beyond its whole ones. A piece refused for its results is halved
//! along the same alignment ([`halves`]).

/// One piece of a range: blocks `from..=to`, `to - from + 1` a power of two, `from` a multiple
/// of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Piece {
    /// Its first block.
    pub from: u64,
    /// Its last block (inclusive).
    pub to: u64,
}

impl Piece {
    /// Its number of blocks.
    pub fn blocks(&self) -> u64 {
        self.to - self.from + 1
    }
}

/// The largest power of two at most `cap` (at least 1): the size of the whole pieces under a cap
/// of `cap` blocks per query.
pub fn piece_size(cap: u64) -> u64 {
    if cap <= 1 {
        1
    } else {
        1 << (63 - cap.leading_zeros())
    }
}

/// The range `from..=to` (`from <= to`) as aligned pieces of at most `cap` blocks, in block
/// order: at each block the largest power of two at most [`piece_size`]`(cap)` that it is a
/// multiple of and that ends within the range. `limit`: the most pieces wanted; `None` when the
/// range needs more (nothing is asked then).
pub fn pieces(from: u64, to: u64, cap: u64, limit: usize) -> Option<Vec<Piece>> {
    let most = piece_size(cap);
    let mut out = Vec::new();
    let mut at = from;
    loop {
        // The alignment of `at` (0 is aligned to anything), within the cap and the range's end.
        let aligned = if at == 0 {
            most
        } else {
            1 << at.trailing_zeros().min(63)
        };
        let mut size = aligned.min(most);
        while size > 1 && at.checked_add(size - 1).is_none_or(|end| end > to) {
            size /= 2;
        }
        if out.len() == limit {
            return None;
        }
        out.push(Piece {
            from: at,
            to: at + size - 1,
        });
        match (at + size - 1).checked_add(1) {
            Some(next) if next <= to => at = next,
            _ => return Some(out),
        }
    }
}

/// How many blocks, at most, `limit` pieces under `cap` cover from any start: the range a
/// request may ask when the pieces it may use are `limit` (the refusal's `N`). Edge pieces are
/// counted at their worst: a range this long always fits in `limit` pieces.
pub fn covered(cap: u64, limit: usize) -> u64 {
    let most = piece_size(cap);
    // A range of whole pieces, shifted off their alignment, takes one more whole piece's worth
    // of edge pieces: at most log2(most) on each side, and one piece split between them.
    let edges = 2 * u64::from(most.trailing_zeros()) + 1;
    (limit as u64)
        .saturating_sub(edges)
        .saturating_mul(most)
        .max(1)
}

/// `piece` cut in two along its alignment (each half aligned to its size); `None` for a piece of
/// one block.
pub fn halves(piece: Piece) -> Option<(Piece, Piece)> {
    let half = piece.blocks() / 2;
    (half > 0).then(|| {
        (
            Piece {
                from: piece.from,
                to: piece.from + half - 1,
            },
            Piece {
                from: piece.from + half,
                to: piece.to,
            },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every piece aligned and a power of two within the cap, the pieces contiguous and covering
    /// exactly `from..=to`.
    fn check(from: u64, to: u64, cap: u64, got: &[Piece]) {
        let most = piece_size(cap);
        assert_eq!(got.first().unwrap().from, from);
        assert_eq!(got.last().unwrap().to, to);
        for w in got.windows(2) {
            assert_eq!(w[0].to + 1, w[1].from, "contiguous");
        }
        for p in got {
            let n = p.blocks();
            assert!(n.is_power_of_two() && n <= most, "{p:?}");
            assert_eq!(p.from % n, 0, "{p:?} aligned");
        }
    }

    #[test]
    fn a_range_within_one_aligned_piece_is_one_piece() {
        assert_eq!(
            pieces(1024, 2047, 1000, 100).unwrap(),
            // 1,000 allows 512-block pieces: two.
            vec![
                Piece {
                    from: 1024,
                    to: 1535
                },
                Piece {
                    from: 1536,
                    to: 2047
                }
            ]
        );
        assert_eq!(pieces(0, 0, 10, 1).unwrap(), vec![Piece { from: 0, to: 0 }]);
    }

    #[test]
    fn the_pieces_are_aligned_so_two_overlapping_queries_share_them() {
        let a = pieces(1_000, 50_999, 10_000, 100).unwrap();
        let b = pieces(3_000, 60_000, 10_000, 100).unwrap();
        check(1_000, 50_999, 10_000, &a);
        check(3_000, 60_000, 10_000, &b);
        let shared: Vec<&Piece> = a.iter().filter(|p| b.contains(p)).collect();
        // The whole 8,192-block pieces inside both (blocks 8,192 to 49,151) are the same pieces.
        let whole = shared.iter().filter(|p| p.blocks() == 8_192).count();
        assert_eq!(whole, 5, "{shared:?}");
    }

    #[test]
    fn edge_pieces_stay_within_two_log2_of_the_cap() {
        for (from, to, cap) in [
            (1, 50_000, 10),
            (12_345, 62_344, 1_000),
            (7, 1_000_006, 10_000),
            (u64::MAX - 5_000_000, u64::MAX - 1, 1 << 20),
        ] {
            let got = pieces(from, to, cap, usize::MAX).unwrap();
            check(from, to, cap, &got);
            let most = piece_size(cap);
            let whole = (to - from + 1) / most;
            let edges = 2 * u64::from(most.trailing_zeros());
            assert!(
                got.len() as u64 <= whole + edges + 1,
                "{} pieces",
                got.len()
            );
        }
    }

    #[test]
    fn more_pieces_than_allowed_is_none_and_covered_always_fits() {
        assert_eq!(
            pieces(1, 50_000, 10, 500),
            None,
            "50,000 blocks behind a 10-block cap"
        );
        for cap in [10, 1_000, 10_000] {
            for limit in [40, 100, 500] {
                let n = covered(cap, limit);
                for from in [0, 1, 7, 999, 123_457] {
                    let got = pieces(from, from + n - 1, cap, limit);
                    assert!(
                        got.is_some(),
                        "cap {cap} limit {limit} from {from}: {n} blocks"
                    );
                }
            }
        }
    }

    #[test]
    fn a_piece_halves_along_its_alignment() {
        let (a, b) = halves(Piece {
            from: 8_192,
            to: 16_383,
        })
        .unwrap();
        assert_eq!(
            (a, b),
            (
                Piece {
                    from: 8_192,
                    to: 12_287
                },
                Piece {
                    from: 12_288,
                    to: 16_383
                }
            )
        );
        assert_eq!(halves(Piece { from: 5, to: 5 }), None);
        assert_eq!(piece_size(10), 8);
        assert_eq!(piece_size(1_024), 1_024);
        assert_eq!(piece_size(0), 1);
    }
}
