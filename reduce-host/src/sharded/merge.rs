//! What each rank does with its local result: the exchanges and the merge, in rank order, into the
//! result one GPU would give for the concatenated input. Device-free, so the CPU tests drive them with
//! local results computed by the CPU references.
use std::cmp::Reverse;

use reduce_contract::builtin::SumAcc;
use reduce_contract::reproducible::{CHUNK, COMBINE_LANES, ReproAcc, tree};
use reduce_contract::stats::{Extrema, Moments, SummaryAcc};
use reduce_contract::topk::value_key;

use super::communicator::Communicator;
use super::record::{
    Exchanged, Header, exchange, failed_rank, get_element, get_elements, pod_bytes, pod_from,
    put_elements,
};
use crate::cpu::{ReproSum, chunk_partial};
use crate::element::{Element, Indexed};
use crate::error::{Error, Result};
use crate::topk::TopKElement;

/// The sum over all ranks: each rank's local sum, added in rank order (integers wrap, as on one GPU).
pub(crate) fn sum<A: SumAcc>(
    comm: &mut impl Communicator,
    header: &Header,
    local: Result<A>,
) -> Result<A> {
    let ex = exchange(comm, header, local.map(|a| pod_bytes(&a)))?;
    Ok(ex
        .inline
        .iter()
        .map(|b| pod_from::<A>(b))
        .fold(A::ZERO, |acc, x| acc.add(x)))
}

/// The best element over all ranks (argmax with `largest`, else argmin), its index global: NaN wins
/// (either way, as on one GPU), then the greater (or lesser) value, then the smaller global index.
pub(crate) fn best<T: TopKElement>(
    comm: &mut impl Communicator,
    header: &Header,
    local: Result<Option<Indexed<T>>>,
    largest: bool,
) -> Result<Option<Indexed<T>>> {
    let inline = local.map(|local| {
        let mut inline = Vec::new();
        inline.extend_from_slice(&local.map_or(u64::MAX, |l| l.index).to_le_bytes());
        put_elements(&mut inline, &[local.map_or(T::default(), |l| l.value)]);
        inline
    });
    let ex = exchange(comm, header, inline)?;
    let offsets = ex.offsets();
    let mut best: Option<Indexed<T>> = None;
    for (b, offset) in ex.inline.iter().zip(offsets) {
        let index = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
        if index == u64::MAX {
            continue;
        }
        let value = get_element::<T>(&b[8..]);
        let candidate = Indexed {
            value,
            index: offset + index,
        };
        // Ranks come in index order, so only a strictly better value replaces: ties keep the first.
        if best.is_none_or(|b| value_key(value, largest) > value_key(b.value, largest)) {
            best = Some(candidate);
        }
    }
    Ok(best)
}

/// A rank's head in [`merge_sorted`]: its position, and the entry there with its key (`None` past its
/// valid entries).
type Head<T> = (usize, Option<(u64, Indexed<T>)>);

/// Appends the `k` best of every rank's entries to `out`, best first: by value key (NaN first), then by
/// global index. `lists[g]` is rank `g`'s encoded entries (local indices; `offsets[g]` makes them global),
/// **sorted best first** as the kernels write them, with padding (index `u64::MAX`) only at the end. A
/// merge of `G` sorted lists, `O(G·k)`, with no sort. Returns a padding entry if one was met (a row whose
/// ranks hold fewer than `k` elements together).
fn merge_sorted<T: TopKElement>(
    lists: &[&[u8]],
    offsets: &[u64],
    k: usize,
    largest: bool,
    out: &mut Vec<Indexed<T>>,
    heads: &mut Vec<Head<T>>,
) -> Option<Indexed<T>> {
    let size = 8 + size_of::<T>();
    let mut padding = None;
    let mut read = |list: &[u8], at: usize, offset: u64| -> Option<(u64, Indexed<T>)> {
        let e = list.get(at * size..(at + 1) * size)?;
        let index = u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
        let value = get_element::<T>(&e[8..]);
        if index == u64::MAX {
            padding.get_or_insert(Indexed { value, index });
            return None;
        }
        let entry = Indexed {
            value,
            index: offset + index,
        };
        Some((value_key(value, largest), entry))
    };
    heads.clear();
    for (list, &offset) in lists.iter().zip(offsets) {
        heads.push((0, read(list, 0, offset)));
    }
    for _ in 0..k {
        // The best head; on equal keys the earlier rank, whose global indices are all smaller.
        let mut best: Option<(usize, u64)> = None;
        for (g, (_, head)) in heads.iter().enumerate() {
            if let Some((key, _)) = head
                && best.is_none_or(|(_, b)| *key > b)
            {
                best = Some((g, *key));
            }
        }
        let Some((g, _)) = best else { break };
        let (at, head) = &mut heads[g];
        out.push(head.expect("the best head has an entry").1);
        *at += 1;
        *head = read(lists[g], *at, offsets[g]);
        debug_assert!(
            head.is_none_or(|(key, e)| {
                let last = out.last().expect("pushed");
                (Reverse(key), e.index) > (Reverse(value_key(last.value, largest)), last.index)
            }),
            "rank {g}'s entries are not sorted best first"
        );
    }
    padding
}

/// Encodes `entries` (value, local index) pairs: index then value, each.
fn put_entries<T: Element>(out: &mut Vec<u8>, values: &[T], indices: &[u64]) {
    for (v, i) in values.iter().zip(indices) {
        out.extend_from_slice(&i.to_le_bytes());
        put_elements(out, std::slice::from_ref(v));
    }
}

/// A top-k rank's local result as the first exchange's status (nothing inline, or the error) and its
/// values and indices (empty after an error).
fn split_local<T>(local: Result<(Vec<T>, Vec<u64>)>) -> (Result<Vec<u8>>, Vec<T>, Vec<u64>) {
    match local {
        Ok((values, indices)) => (Ok(Vec::new()), values, indices),
        Err(e) => (Err(e), Vec::new(), Vec::new()),
    }
}

/// The first exchange of a top-k call (this rank's local part succeeded or not), then the check that
/// `k` fits the concatenated input: every rank gets the same error.
fn topk_header<T>(
    comm: &mut impl Communicator,
    header: &Header,
    local: Result<(Vec<T>, Vec<u64>)>,
) -> Result<(Exchanged, Vec<T>, Vec<u64>)> {
    let (status, values, indices) = split_local(local);
    let ex = exchange(comm, header, status)?;
    let k = header.params[0];
    if k > ex.total() {
        return Err(Error::InvalidArgument(format!(
            "k = {k} is more than the {} elements of all shards together",
            ex.total()
        )));
    }
    Ok((ex, values, indices))
}

/// The `k` best over all ranks (`header.params[0]`), best first, with global indices, from each rank's
/// local `min(k, len)` best (values and indices, sorted best first as the kernels write them).
pub(crate) fn top_k<T: TopKElement>(
    comm: &mut impl Communicator,
    header: &Header,
    local: Result<(Vec<T>, Vec<u64>)>,
    largest: bool,
) -> Result<Vec<Indexed<T>>> {
    let (ex, values, indices) = topk_header(comm, header, local)?;
    let k = ex.headers[0].params[0] as usize;
    // Every rank sends k entries; those past its own count have the index u64::MAX.
    let mut mine = Vec::with_capacity(k * (8 + size_of::<T>()));
    put_entries(&mut mine, &values, &indices);
    let pad = [u64::MAX];
    for _ in values.len()..k {
        put_entries(&mut mine, &[T::default()], &pad);
    }
    let all = comm.all_gather(&mine)?;
    let lists: Vec<&[u8]> = all.chunks_exact(mine.len().max(1)).collect();
    let mut best = Vec::with_capacity(k);
    merge_sorted(
        &lists,
        &ex.offsets(),
        k,
        largest,
        &mut best,
        &mut Vec::new(),
    );
    Ok(best)
}

/// The `k` best of every row over all ranks (each holding some columns of the same rows, in rank order),
/// from each rank's per-row results (`rows · k` entries, padded rows' entries with the index
/// `u64::MAX`). Rows with fewer than `k` elements in all are padded the same way, with the padding value
/// the ranks' own results carry.
pub(crate) fn row_top_k<T: TopKElement>(
    comm: &mut impl Communicator,
    header: &Header,
    local: Result<(Vec<T>, Vec<u64>)>,
    largest: bool,
) -> Result<Vec<Indexed<T>>> {
    let (status, values, indices) = split_local(local);
    let ex = exchange(comm, header, status)?;
    let k = ex.headers[0].params[0] as usize;
    let rows = ex.headers[0].params[1] as usize;
    assert_eq!(values.len(), rows * k, "one row of k results per row");
    let mut mine = Vec::with_capacity(rows * k * (8 + size_of::<T>()));
    put_entries(&mut mine, &values, &indices);
    let all = comm.all_gather(&mine)?;
    let ranks: Vec<&[u8]> = all
        .chunks_exact(mine.len().max(1))
        .take(ex.headers.len())
        .collect();
    let offsets = ex.offsets();
    let row_bytes = k * (8 + size_of::<T>());
    let mut out = Vec::with_capacity(rows * k);
    let mut lists = Vec::with_capacity(ranks.len());
    let mut heads = Vec::with_capacity(ranks.len());
    for r in 0..rows {
        lists.clear();
        lists.extend(
            ranks
                .iter()
                .map(|rank| &rank[r * row_bytes..(r + 1) * row_bytes]),
        );
        let start = out.len();
        let padding = merge_sorted(&lists, &offsets, k, largest, &mut out, &mut heads);
        for _ in out.len() - start..k {
            out.push(padding.expect("a row short of k results is padded on every rank"));
        }
    }
    Ok(out)
}

/// The statistics over all ranks: each rank's accumulator, its indices made global, merged by Chan's
/// formula in rank order (the bits repeat for the same shards).
pub(crate) fn stats(
    comm: &mut impl Communicator,
    header: &Header,
    local: Result<SummaryAcc>,
) -> Result<SummaryAcc> {
    let ex = exchange(comm, header, local.map(|s| pod_bytes(&s)))?;
    let shift = |index: u64, by: u64| {
        if index == Extrema::NONE {
            index
        } else {
            index + by
        }
    };
    let mut acc = SummaryAcc {
        moments: Moments::default(),
        extrema: Extrema::default(),
    };
    for (b, offset) in ex.inline.iter().zip(ex.offsets()) {
        let mut s = pod_from::<SummaryAcc>(b);
        s.extrema.argmin = shift(s.extrema.argmin, offset);
        s.extrema.argmax = shift(s.extrema.argmax, offset);
        acc = SummaryAcc {
            moments: Moments::merge(acc.moments, s.moments),
            extrema: Extrema::merge(acc.extrema, s.extrema),
        };
    }
    Ok(acc)
}

/// Where a shard at global `offset` of `len` elements meets the reproducible sum's chunks (cut at
/// multiples of `CHUNK` of the global index): `head` elements finishing a chunk begun before it, `chunks`
/// whole chunks, then `tail` elements starting one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChunkSplit {
    pub head: u64,
    pub chunks: u64,
    pub tail: u64,
}

impl ChunkSplit {
    pub fn new(offset: u64, len: u64) -> ChunkSplit {
        let head = ((CHUNK - offset % CHUNK) % CHUNK).min(len);
        let chunks = (len - head) / CHUNK;
        ChunkSplit {
            head,
            chunks,
            tail: len - head - chunks * CHUNK,
        }
    }

    /// Bytes of this rank's second exchange: its head and tail elements and its chunks' partials.
    fn bytes<T: ReproSum>(&self) -> u64 {
        (self.head + self.tail) * size_of::<T>() as u64 + self.chunks * size_of::<T::Acc>() as u64
    }
}

/// One rank's part of a reproducible sum: the elements before its first chunk boundary (`head`), the
/// partials of its whole chunks, and the elements after its last boundary (`tail`).
pub(crate) struct ReproParts<T: ReproSum> {
    pub head: Vec<T>,
    pub partials: Vec<T::Acc>,
    pub tail: Vec<T>,
}

/// The reproducible sum of the concatenated shards, bit for bit what one GPU (and
/// [`cpu::sum_reproducible`](crate::cpu::sum_reproducible)) gives: every rank sends the elements of the
/// chunks it shares with its neighbours and the partials of its whole chunks; every rank then forms the
/// shared chunks' partials (the same arithmetic as the kernels) and runs the combine over all partials
/// in global order.
///
/// `local(split)` computes this rank's whole chunks' partials (on its GPU) and its head and tail
/// elements, once the first exchange has told it where its shard starts.
pub(crate) fn reproducible_sum<T: ReproSum + Element>(
    comm: &mut impl Communicator,
    header: &Header,
    local: impl FnOnce(ChunkSplit) -> Result<ReproParts<T>>,
) -> Result<T::Out> {
    let ex = exchange(comm, header, Ok(Vec::new()))?;
    let offsets = ex.offsets();
    let splits: Vec<ChunkSplit> = ex
        .headers
        .iter()
        .zip(&offsets)
        .map(|(h, &o)| ChunkSplit::new(o, h.len))
        .collect();
    let width = splits.iter().map(|s| s.bytes::<T>()).max().unwrap_or(0);
    let width = usize::try_from(width)
        .map_err(|_| Error::InvalidArgument("shard too long for its partials".into()))?;

    // The second exchange: a status word (whether this rank's local part failed), then the bytes.
    let width = width + 8;
    let mut mine = Vec::with_capacity(width);
    let failure = match local(splits[comm.rank()]) {
        Ok(ReproParts {
            head,
            partials,
            tail,
        }) => {
            mine.extend_from_slice(&0u64.to_le_bytes());
            put_elements(&mut mine, &head);
            put_elements(&mut mine, &tail);
            for p in &partials {
                // SAFETY: the accumulators are f64 or `Compensated` (two f64, `repr(C)`): no padding.
                mine.extend_from_slice(unsafe {
                    std::slice::from_raw_parts(
                        (p as *const T::Acc).cast::<u8>(),
                        size_of::<T::Acc>(),
                    )
                });
            }
            assert_eq!(mine.len() as u64, 8 + splits[comm.rank()].bytes::<T>());
            None
        }
        Err(e) => {
            mine.extend_from_slice(&1u64.to_le_bytes());
            Some(e)
        }
    };
    mine.resize(width, 0);
    let all = comm.all_gather(&mine)?;
    if let Some(e) = failure {
        return Err(e);
    }
    if let Some(rank) = all.chunks_exact(width).position(|r| r[..8] != [0; 8]) {
        return Err(failed_rank(rank));
    }

    // The chunk partials in global order; `open` gathers a chunk that spans ranks.
    let mut lanes = vec![T::Acc::ZERO; COMBINE_LANES];
    let mut count = 0usize;
    let mut push = |p: T::Acc| {
        let lane = &mut lanes[count % COMBINE_LANES];
        *lane = lane.merge(p);
        count += 1;
    };
    let mut open: Vec<T> = Vec::with_capacity(CHUNK as usize);
    let elem = size_of::<T>();
    for (bytes, split) in all.chunks_exact(width).zip(&splits) {
        let (head, rest) = bytes[8..].split_at(split.head as usize * elem);
        let (tail, rest) = rest.split_at(split.tail as usize * elem);
        open.extend(get_elements::<T>(head));
        if open.len() as u64 == CHUNK {
            push(chunk_partial(&open));
            open.clear();
        }
        for p in rest
            .chunks_exact(size_of::<T::Acc>())
            .take(split.chunks as usize)
        {
            debug_assert!(open.is_empty(), "whole chunks start at a chunk boundary");
            // SAFETY: `size_of::<T::Acc>()` bytes written above from a `T::Acc`; f64 fields are valid for
            // every bit pattern.
            push(unsafe { p.as_ptr().cast::<T::Acc>().read_unaligned() });
        }
        open.extend(get_elements::<T>(tail));
    }
    if !open.is_empty() {
        push(chunk_partial(&open));
    }
    Ok(T::finish(tree(&mut lanes)))
}

/// The histogram over all ranks: each rank's counts, added (an all-reduce).
pub(crate) fn histogram(
    comm: &mut impl Communicator,
    header: &Header,
    local: Result<Vec<u64>>,
) -> Result<Vec<u64>> {
    let (status, mut counts) = match local {
        Ok(c) => (Ok(Vec::new()), c),
        Err(e) => (Err(e), Vec::new()),
    };
    exchange(comm, header, status)?;
    comm.all_reduce_sum(&mut counts)?;
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use reduce_contract::Elem;
    use reduce_contract::ReduceOp;
    use reduce_contract::stats::Summary;

    use super::super::communicator::LocalCommunicator;
    use super::super::record::CallKind;
    use super::*;
    use crate::cpu;

    /// Runs `rank(comm, shard_range)` on one thread per rank of a local group over `lens` shards.
    fn on_ranks<R: Send>(
        lens: &[usize],
        rank: impl Fn(&mut LocalCommunicator, std::ops::Range<usize>) -> R + Sync,
    ) -> Vec<R> {
        let comms = LocalCommunicator::group(lens.len());
        let mut at = 0;
        let ranges: Vec<_> = lens
            .iter()
            .map(|&l| {
                at += l;
                at - l..at
            })
            .collect();
        std::thread::scope(|s| {
            let handles: Vec<_> = comms
                .into_iter()
                .zip(ranges)
                .map(|(mut c, r)| {
                    let rank = &rank;
                    s.spawn(move || rank(&mut c, r))
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        })
    }

    fn header(
        comm: &LocalCommunicator,
        call: CallKind,
        elem: Elem,
        len: usize,
        params: [u64; 3],
    ) -> Header {
        Header {
            call,
            elem,
            size: comm.size() as u32,
            len: len as u64,
            params,
            uuid: [comm.rank() as u8; 16],
            failed: false,
        }
    }

    /// 1–8 shards of uneven lengths, empty ones included, and values with ties, NaN, ±0 and ±∞.
    fn shards() -> impl Strategy<Value = (Vec<usize>, Vec<f32>)> {
        prop::collection::vec(
            prop_oneof![Just(0usize), 1usize..40, 8000usize..9000],
            1..=8,
        )
        .prop_flat_map(|lens| {
            let n: usize = lens.iter().sum();
            let value = prop_oneof![
                8 => (-4i32..4).prop_map(|v| v as f32),
                1 => Just(f32::NAN),
                1 => Just(-0.0f32),
                1 => Just(f32::INFINITY),
                1 => Just(f32::NEG_INFINITY),
                4 => any::<f32>().prop_filter("finite", |x| x.is_finite()),
            ];
            (Just(lens), prop::collection::vec(value, n))
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        #[test]
        fn argmax_argmin_and_sums_match_one_input((lens, xs) in shards()) {
            for largest in [true, false] {
                let got = on_ranks(&lens, |c, r| {
                    let shard = &xs[r.clone()];
                    let local = if largest { cpu::argmax(shard) } else { cpu::argmin(shard) }
                        .map(|(i, value)| Indexed { value, index: i as u64 });
                    let h = header(c, CallKind::ArgMax, Elem::F32, shard.len(), [0; 3]);
                    best(c, &h, Ok(local), largest).unwrap()
                });
                let want = if largest { cpu::argmax(&xs) } else { cpu::argmin(&xs) };
                for g in got {
                    prop_assert_eq!(g.map(|g| (g.index as usize, g.value.to_bits())),
                        want.map(|(i, v)| (i, v.to_bits())));
                }
            }
            let ints: Vec<i64> = xs.iter().map(|x| if x.is_finite() { (*x as i64).wrapping_mul(1_000_000_007) } else { i64::MAX }).collect();
            let sums = on_ranks(&lens, |c, r| {
                let local = ints[r.clone()].iter().fold(0i64, |a, x| a.wrapping_add(*x));
                let h = header(c, CallKind::Sum, Elem::I64, r.len(), [0; 3]);
                sum(c, &h, Ok(local)).unwrap()
            });
            let want = ints.iter().fold(0i64, |a, x| a.wrapping_add(*x));
            prop_assert!(sums.iter().all(|s| *s == want));
        }

        #[test]
        fn top_k_matches_a_sort_of_the_whole_input((lens, xs) in shards(), k in 0usize..50) {
            let n = xs.len();
            for largest in [true, false] {
                let got = on_ranks(&lens, |c, r| {
                    let shard = &xs[r.clone()];
                    let h = header(c, CallKind::MaxK, Elem::F32, shard.len(), [k as u64, 0, 0]);
                    // The local top-k, sorted best first as the kernels write it.
                    let mut local: Vec<(usize, f32)> = shard.iter().copied().enumerate().collect();
                    local.sort_by_key(|(i, x)| (Reverse(value_key(*x, largest)), *i));
                    local.truncate(k.min(shard.len()));
                    let (idx, vals): (Vec<u64>, Vec<f32>) = local.iter().map(|(i, x)| (*i as u64, *x)).unzip();
                    top_k(c, &h, Ok((vals, idx)), largest)
                });
                let mut want: Vec<(usize, f32)> = xs.iter().copied().enumerate().collect();
                want.sort_by_key(|(i, x)| (Reverse(value_key(*x, largest)), *i));
                want.truncate(k);
                for g in got {
                    if k > n {
                        prop_assert!(matches!(g, Err(Error::InvalidArgument(_))));
                        continue;
                    }
                    let g: Vec<(usize, u32)> = g.unwrap().iter().map(|e| (e.index as usize, e.value.to_bits())).collect();
                    let w: Vec<(usize, u32)> = want.iter().map(|(i, v)| (*i, v.to_bits())).collect();
                    prop_assert_eq!(g, w);
                }
            }
        }

        #[test]
        fn statistics_merge_into_one_inputs((lens, xs) in shards()) {
            let xs: Vec<f64> = xs.iter().map(|&x| if x.is_finite() { x as f64 } else { 0.5 }).collect();
            let lift_all = |s: &[f64], base: u64| s.iter().enumerate().fold(
                <Summary<f64> as ReduceOp>::identity(),
                |a, (i, &x)| <Summary<f64> as ReduceOp>::combine(a, <Summary<f64> as ReduceOp>::lift(x, base + i as u64)),
            );
            let got = on_ranks(&lens, |c, r| {
                let local = lift_all(&xs[r.clone()], 0);
                let h = header(c, CallKind::Stats, Elem::F64, r.len(), [0; 3]);
                stats(c, &h, Ok(local)).unwrap()
            });
            let want = lift_all(&xs, 0);
            // Merging in another order moves the mean by rounding errors of the elements' size, not the
            // mean's: finite f32s up to 3e38 that nearly cancel leave a small mean (a saved case).
            let largest = xs.iter().fold(1.0f64, |m, x| m.max(x.abs()));
            let mean_tolerance = 16.0 * f64::EPSILON * xs.len().max(1) as f64 * largest;
            for g in got {
                prop_assert_eq!(g.extrema, want.extrema);
                prop_assert_eq!(g.moments.n, want.moments.n);
                prop_assert!((g.moments.mean - want.moments.mean).abs() <= mean_tolerance);
                prop_assert!((g.moments.m2 - want.moments.m2).abs() <= 1e-9 * want.moments.m2.abs().max(1.0));
            }
        }

        #[test]
        fn reproducible_sums_have_the_bits_of_one_input(
            lens in prop::collection::vec(prop_oneof![Just(0usize), 1usize..9000, 8192usize..30000], 1..=8),
            seed in any::<u64>(),
        ) {
            let n: usize = lens.iter().sum();
            let mut s = seed | 1;
            let xs: Vec<f32> = (0..n).map(|_| {
                s ^= s << 13; s ^= s >> 7; s ^= s << 17;
                ((s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) as f32 * 1e3
            }).collect();
            let got = on_ranks(&lens, |c, r| {
                let shard = &xs[r.clone()];
                let h = header(c, CallKind::ReproducibleSum, Elem::F32, shard.len(), [0; 3]);
                reproducible_sum::<f32>(c, &h, |split| {
                    let (head, rest) = shard.split_at(split.head as usize);
                    let (whole, tail) = rest.split_at((split.chunks * CHUNK) as usize);
                    let partials = whole.chunks(CHUNK as usize).map(chunk_partial).collect();
                    Ok(ReproParts { head: head.to_vec(), partials, tail: tail.to_vec() })
                }).unwrap()
            });
            let want = cpu::sum_reproducible(&xs);
            for g in got {
                prop_assert_eq!(g.to_bits(), want.to_bits());
            }
        }
    }

    #[test]
    fn per_row_top_k_pads_short_rows_like_one_gpu() {
        // Two rows over three ranks of 1, 0 and 2 columns; k = 4 > 3 columns in all.
        let rows = [[5.0f32, 1.0, 7.0], [2.0, 2.0, f32::NAN]];
        let lens = [1usize, 0, 2];
        let k = 4;
        let pad = f32::NEG_INFINITY;
        let got = on_ranks(&lens, |c, r| {
            let h = header(c, CallKind::RowMaxK, Elem::F32, r.len(), [k as u64, 2, 0]);
            let mut values = Vec::new();
            let mut indices = Vec::new();
            for row in &rows {
                let mut local: Vec<(usize, f32)> =
                    row[r.clone()].iter().copied().enumerate().collect();
                local.sort_by_key(|(i, x)| (Reverse(value_key(*x, true)), *i));
                for j in 0..k {
                    let (i, v) = local
                        .get(j)
                        .map_or((u64::MAX, pad), |&(i, v)| (i as u64, v));
                    values.push(v);
                    indices.push(i);
                }
            }
            row_top_k(c, &h, Ok((values, indices)), true).unwrap()
        });
        for g in got {
            let g: Vec<(u64, f32)> = g.iter().map(|e| (e.index, e.value)).collect();
            assert_eq!(&g[..4], &[(2, 7.0), (0, 5.0), (1, 1.0), (u64::MAX, pad)]);
            assert_eq!((g[4].0, g[4].1.is_nan()), (2, true));
            assert_eq!(&g[5..], &[(0, 2.0), (1, 2.0), (u64::MAX, pad)]);
        }
    }

    #[test]
    fn histograms_add_and_mismatched_calls_fail_on_every_rank() {
        let got = on_ranks(&[3, 0, 5], |c, r| {
            let h = header(c, CallKind::Histogram, Elem::F32, r.len(), [4, 0, 0]);
            histogram(c, &h, Ok(vec![r.len() as u64; 4])).unwrap()
        });
        assert!(got.iter().all(|g| g == &[8; 4]));

        let got = on_ranks(&[3, 3], |c, r| {
            let elem = if c.rank() == 1 { Elem::F64 } else { Elem::F32 };
            let h = header(c, CallKind::Histogram, elem, r.len(), [4, 0, 0]);
            histogram(c, &h, Ok(vec![0; 4]))
        });
        for g in got {
            assert!(
                matches!(&g, Err(Error::InvalidArgument(m)) if m.contains("rank 1's shard holds f64")),
                "{g:?}"
            );
        }
    }

    #[test]
    fn a_rank_whose_part_fails_fails_every_rank_without_a_hang() {
        let got = on_ranks(&[4, 4, 4], |c, r| {
            let h = header(c, CallKind::Sum, Elem::F64, r.len(), [0; 3]);
            let local = if c.rank() == 1 {
                Err(Error::InvalidArgument("bad shard".into()))
            } else {
                Ok(1.0f64)
            };
            sum(c, &h, local)
        });
        assert!(matches!(&got[1], Err(Error::InvalidArgument(m)) if m == "bad shard"));
        for g in [&got[0], &got[2]] {
            assert!(
                matches!(g, Err(Error::Collective(m)) if m.contains("rank 1")),
                "{g:?}"
            );
        }
        let got = on_ranks(&[9000, 9000], |c, r| {
            let h = header(c, CallKind::ReproducibleSum, Elem::F32, r.len(), [0; 3]);
            let rank = c.rank();
            reproducible_sum::<f32>(c, &h, |split| {
                if rank == 0 {
                    Err(Error::InvalidArgument("bad shard".into()))
                } else {
                    assert_eq!(split.chunks, 0);
                    Ok(ReproParts {
                        head: vec![0.0; split.head as usize],
                        partials: vec![],
                        tail: vec![0.0; split.tail as usize],
                    })
                }
            })
        });
        assert!(matches!(&got[0], Err(Error::InvalidArgument(_))));
        assert!(
            matches!(&got[1], Err(Error::Collective(m)) if m.contains("rank 0")),
            "{:?}",
            got[1]
        );
    }

    #[test]
    fn chunk_splits_cover_the_shard() {
        assert_eq!(
            ChunkSplit::new(0, 0),
            ChunkSplit {
                head: 0,
                chunks: 0,
                tail: 0
            }
        );
        assert_eq!(
            ChunkSplit::new(0, 20000),
            ChunkSplit {
                head: 0,
                chunks: 2,
                tail: 20000 - 16384
            }
        );
        assert_eq!(
            ChunkSplit::new(100, 50),
            ChunkSplit {
                head: 50,
                chunks: 0,
                tail: 0
            }
        );
        assert_eq!(
            ChunkSplit::new(8000, 9000),
            ChunkSplit {
                head: 192,
                chunks: 1,
                tail: 9000 - 192 - 8192
            }
        );
    }
}
