//! Decoupled look-back (Merrill & Garland, "Single-pass Parallel Prefix Scan with Decoupled Look-back"): the
//! device-wide scan of per-tile counts in the same pass that produces them.
//!
//! Tiles are numbered in the order blocks start (an atomic counter, not `blockIdx`), so every tile with a
//! smaller number belongs to a block that is already running: waiting on it cannot deadlock. Each tile
//! publishes its own count (AGGREGATE) as soon as it knows it, then walks back over its predecessors 32 at
//! a time, summing aggregates until it meets one that knows its inclusive prefix (INCLUSIVE), and publishes
//! its own inclusive prefix for the tiles after it.
//!
//! A tile's state is one 64-bit word, flag in the top two bits and count in the low 62, so flag and count
//! are written and read together and need no fence between them.
use crate::arch;
use crate::op::Plus;
use crate::tile::Tile;

/// Pause between two polls of a predecessor that has not published, in nanoseconds: about the time a
/// store takes to reach L2, the order of the delays CUB's sm_90 tunings give their look-backs.
const POLL_PAUSE_NS: u32 = 100;

const AGGREGATE: u64 = 1 << 62;
const INCLUSIVE: u64 = 2 << 62;
const FLAGS: u64 = 3 << 62;

/// The look-back state of one launch: word 0 is the tile counter (its low 32 bits), word `1 + k` the state
/// of tile `k`. The host zeroes `1 + tiles` words before every launch (zero = not yet published).
#[derive(Clone, Copy)]
pub struct TileStates {
    words: *mut u64,
}

impl TileStates {
    /// The state words at `words`.
    ///
    /// # Safety
    /// `words` must be valid for `1 + gridDim.x` zeroed `u64`s that no other kernel uses concurrently, and
    /// the launch must run one tile per block. A kernel that only draws tiles
    /// ([`next_tile`](Self::next_tile), never [`exclusive_prefix`](Self::exclusive_prefix)) needs word 0
    /// alone.
    #[inline(always)]
    pub unsafe fn new(words: *mut u64) -> Self {
        TileStates { words }
    }

    /// Draws the next tile number; call once per block.
    #[inline(always)]
    pub fn next_tile(self) -> u32 {
        // SAFETY: word 0 is a valid, 8-byte aligned counter (per `new`); its low half is a u32.
        unsafe { arch::atomic_add_u32(self.words as *mut u32, 1) }
    }

    #[inline(always)]
    fn publish(self, tile: u32, word: u64) {
        // SAFETY: tile < gridDim.x (one tile per block), so the word is in bounds; a volatile store goes to
        // L2, where the other blocks' volatile loads see it.
        unsafe { self.words.add(1 + tile as usize).write_volatile(word) }
    }

    /// Everything before `tile` plus `aggregate`, published for the tiles after it; returns the exclusive
    /// prefix of `tile` (the number of items in tiles `0..tile`).
    ///
    /// **Result:** in every lane of `warp`.
    ///
    /// # Safety
    /// Called by one whole, converged warp per tile, once, with `tile` from [`next_tile`](Self::next_tile),
    /// the same in every lane; `aggregate < 2^62`.
    #[inline(always)]
    pub unsafe fn exclusive_prefix(self, warp: Tile<32>, tile: u32, aggregate: u64) -> u64 {
        let first = warp.thread_rank() == 0;
        if tile == 0 {
            if first {
                self.publish(0, INCLUSIVE | aggregate);
            }
            return 0;
        }
        if first {
            self.publish(tile, AGGREGATE | aggregate);
        }
        let mut prefix = 0u64;
        // Lane k inspects tile `end - 1 - k`.
        let mut end = tile as i64;
        loop {
            let pred = end - 1 - warp.thread_rank() as i64;
            let word = loop {
                // Tiles before 0 read as an inclusive 0, which ends the walk.
                // SAFETY: 0 <= pred < tile < gridDim.x; other blocks write the word, so it is read volatile.
                let w = if pred >= 0 {
                    unsafe { arch::load_coherent(self.words.add(1 + pred as usize)) }
                } else {
                    INCLUSIVE
                };
                // SAFETY: the whole warp runs this loop together (the exit is a warp vote).
                if !unsafe { warp.any(w & FLAGS == 0) } {
                    break w;
                }
                // A predecessor has not published yet: pause before polling again, so that the waiting
                // warps' loads do not crowd L2, where the running tiles' reads and stores go.
                arch::nanosleep(POLL_PAUSE_NS);
            };
            // SAFETY: converged (the same trip of the outer loop in every lane).
            let inclusive = unsafe { warp.ballot(word & FLAGS == INCLUSIVE) };
            // The nearest inclusive predecessor ends the window: lanes past it do not count.
            let stop = if inclusive == 0 {
                32
            } else {
                inclusive.trailing_zeros()
            };
            let mine = if warp.thread_rank() <= stop {
                word & !FLAGS
            } else {
                0
            };
            // SAFETY: converged, as above.
            prefix += unsafe { warp.all_reduce::<Plus<u64>>(mine) };
            if inclusive != 0 {
                break;
            }
            end -= 32;
        }
        if first {
            self.publish(tile, INCLUSIVE | (prefix + aggregate));
        }
        prefix
    }
}
