//! [`Communicator`]: the two collectives a sharded reduction needs, and [`LocalCommunicator`], which runs
//! them between threads of one process, so the merges can be tested without a second GPU or NCCL.
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::error::{Error, Result};

/// The collectives [`ShardedReduce`](super::ShardedReduce) combines its ranks' partial results with: an
/// all-gather of bytes and an all-reduce of `u64` counts, over `size` ranks numbered `0..size`.
///
/// Every rank calls the same collectives in the same order with the same lengths (the sharded handle makes
/// sure of that: its first exchange of every call has a fixed size and carries what the others need to
/// check). A failed or stalled collective returns an error on the ranks that see it; it must not hang.
///
/// Implementations: [`LocalCommunicator`] (threads of one process) and, with the `nccl` feature,
/// `NcclCommunicator` (one GPU per rank, in one process or many). Yours (MPI, a
/// framework's process group) implements these two methods.
pub trait Communicator {
    /// This rank's number, `0..size()`.
    fn rank(&self) -> usize;
    /// How many ranks take part.
    fn size(&self) -> usize;
    /// Every rank's `mine`, concatenated in rank order (`size() · mine.len()` bytes). Every rank passes the
    /// same length.
    fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<u8>>;
    /// Replaces `counts` by the element-wise wrapping sum of every rank's `counts` (same length on every
    /// rank). The default gathers and adds in rank order.
    fn all_reduce_sum(&mut self, counts: &mut [u64]) -> Result<()> {
        let mine: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
        let all = self.all_gather(&mine)?;
        counts.fill(0);
        for rank in all.chunks_exact(mine.len().max(1)).take(self.size()) {
            for (c, b) in counts.iter_mut().zip(rank.chunks_exact(8)) {
                *c = c.wrapping_add(u64::from_le_bytes(b.try_into().expect("8 bytes")));
            }
        }
        Ok(())
    }
    /// Whether ranks may run on the same GPU. Real transports say no (NCCL refuses it), so a sharded call
    /// whose ranks share a GPU is an [`Error::InvalidArgument`]; a simulation may say yes.
    fn ranks_may_share_gpus(&self) -> bool {
        false
    }
}

/// A [`Communicator`] between threads of one process: rank `r` of [`group`](Self::group)`(n)` is used by
/// one thread each. For tests and simulations (the merges of every sharded call run through it exactly as
/// through NCCL); one thread per GPU in a real program would use NCCL instead, whose collectives stay on
/// the GPUs.
///
/// A collective waits at most [`timeout`](Self::set_timeout) (60 s by default) for the other ranks; a rank
/// dropped while others wait, a length that differs between ranks, or the time running out give every
/// waiting rank an error instead of a hang.
pub struct LocalCommunicator {
    rank: usize,
    shared: Arc<Shared>,
    timeout: Duration,
    share_gpus: bool,
}

struct Shared {
    size: usize,
    state: Mutex<State>,
    changed: Condvar,
}

struct State {
    /// Counts the completed collectives; a waiting rank sees its own finish when this moves on.
    generation: u64,
    slots: Vec<Option<Vec<u8>>>,
    /// The last collective's result, kept until every rank has taken it (the next one cannot finish
    /// before).
    result: Option<std::result::Result<Arc<Vec<u8>>, String>>,
    /// A rank was dropped, or timed out: every later collective fails.
    broken: Option<String>,
}

impl LocalCommunicator {
    /// `size` communicators, one per rank, to be moved to one thread each. Their ranks must run on
    /// distinct GPUs, as with NCCL.
    pub fn group(size: usize) -> Vec<LocalCommunicator> {
        Self::make(size, false)
    }

    /// [`group`](Self::group) whose ranks may share one GPU: a simulation of `size` GPUs on one, for tests
    /// of the sharded merges on a one-GPU machine.
    pub fn group_on_one_gpu(size: usize) -> Vec<LocalCommunicator> {
        Self::make(size, true)
    }

    fn make(size: usize, share_gpus: bool) -> Vec<LocalCommunicator> {
        let shared = Arc::new(Shared {
            size,
            state: Mutex::new(State {
                generation: 0,
                slots: vec![None; size],
                result: None,
                broken: None,
            }),
            changed: Condvar::new(),
        });
        (0..size)
            .map(|rank| LocalCommunicator {
                rank,
                shared: shared.clone(),
                timeout: Duration::from_secs(60),
                share_gpus,
            })
            .collect()
    }

    /// How long a collective waits for the other ranks before it fails (and breaks the group).
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A rank that panicked while holding the lock left consistent state (every write is one
        // assignment), so the poison is ignored.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn broken(why: &str) -> Error {
    Error::Collective(format!("local group: {why}"))
}

impl Communicator for LocalCommunicator {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.shared.size
    }

    fn ranks_may_share_gpus(&self) -> bool {
        self.share_gpus
    }

    fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<u8>> {
        let deadline = Instant::now() + self.timeout;
        let mut state = self.lock();
        if let Some(why) = &state.broken {
            return Err(broken(why));
        }
        let generation = state.generation;
        state.slots[self.rank] = Some(mine.to_vec());
        if state.slots.iter().all(Option::is_some) {
            // The last rank to arrive assembles the result for everyone.
            let slots: Vec<Vec<u8>> = state.slots.iter_mut().map(|s| s.take().unwrap()).collect();
            state.result = Some(if slots.iter().all(|s| s.len() == mine.len()) {
                Ok(Arc::new(slots.concat()))
            } else {
                let lengths: Vec<usize> = slots.iter().map(Vec::len).collect();
                Err(format!(
                    "ranks passed different lengths to all_gather: {lengths:?}"
                ))
            });
            state.generation += 1;
            self.shared.changed.notify_all();
        } else {
            while state.generation == generation {
                if let Some(why) = &state.broken {
                    return Err(broken(why));
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    let why = format!(
                        "rank {} waited {:?} for the other ranks",
                        self.rank, self.timeout
                    );
                    state.broken = Some(why.clone());
                    self.shared.changed.notify_all();
                    return Err(broken(&why));
                }
                state = self
                    .shared
                    .changed
                    .wait_timeout(state, left)
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .0;
            }
        }
        match state.result.as_ref().expect("set by the last rank") {
            Ok(all) => Ok(all.as_ref().clone()),
            Err(why) => Err(broken(why)),
        }
    }
}

impl Drop for LocalCommunicator {
    fn drop(&mut self) {
        let mut state = self.lock();
        if state.broken.is_none() && self.shared.size > 1 {
            state.broken = Some(format!("rank {} was dropped", self.rank));
        }
        self.shared.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathers_in_rank_order_round_after_round() {
        for size in 1..=8 {
            let comms = LocalCommunicator::group(size);
            let results: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
                let handles: Vec<_> = comms
                    .into_iter()
                    .map(|mut c| {
                        s.spawn(move || {
                            (0..20u8)
                                .map(|round| c.all_gather(&[c.rank() as u8, round]).unwrap())
                                .collect()
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for per_rank in results {
                for (round, all) in per_rank.iter().enumerate() {
                    let want: Vec<u8> = (0..size as u8).flat_map(|r| [r, round as u8]).collect();
                    assert_eq!(all, &want);
                }
            }
        }
    }

    #[test]
    fn all_reduce_adds_every_ranks_counts() {
        let comms = LocalCommunicator::group(3);
        let sums: Vec<Vec<u64>> = std::thread::scope(|s| {
            let handles: Vec<_> = comms
                .into_iter()
                .map(|mut c| {
                    s.spawn(move || {
                        let r = c.rank() as u64;
                        let mut counts = vec![r, 10 * r, u64::MAX];
                        c.all_reduce_sum(&mut counts).unwrap();
                        counts
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for counts in sums {
            assert_eq!(counts, [3, 30, u64::MAX.wrapping_mul(3)]);
        }
    }

    #[test]
    fn unequal_lengths_a_dropped_rank_and_a_timeout_are_errors_not_hangs() {
        let comms = LocalCommunicator::group(2);
        let errors: Vec<bool> = std::thread::scope(|s| {
            let handles: Vec<_> = comms
                .into_iter()
                .map(|mut c| s.spawn(move || c.all_gather(&vec![0; c.rank() + 1]).is_err()))
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(errors, [true, true]);

        let mut comms = LocalCommunicator::group(2);
        drop(comms.pop());
        assert!(matches!(
            comms[0].all_gather(&[1]),
            Err(Error::Collective(_))
        ));

        let mut comms = LocalCommunicator::group(2);
        comms[0].set_timeout(Duration::from_millis(50));
        let e = comms[0].all_gather(&[1]).unwrap_err();
        assert!(e.to_string().contains("waited"), "{e}");
        // The group is broken for the other rank too.
        assert!(comms[1].all_gather(&[1]).is_err());
    }
}
