//! The first exchange of every sharded call: a fixed-size record per rank, a header that every rank checks
//! every other rank's against (so mismatched calls fail alike on all ranks instead of hanging in a
//! collective of unequal sizes) and, for results of a few bytes, the result itself.
use reduce_contract::{Elem, Pod};

use super::communicator::Communicator;
use crate::element::Element;
use crate::error::{Error, Result};

/// Which sharded call a rank is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub(crate) enum CallKind {
    Sum = 1,
    ReproducibleSum,
    ArgMax,
    ArgMin,
    MaxK,
    MinK,
    RowMaxK,
    RowMinK,
    Histogram,
    Stats,
}

impl CallKind {
    const ALL: [CallKind; 10] = [
        CallKind::Sum,
        CallKind::ReproducibleSum,
        CallKind::ArgMax,
        CallKind::ArgMin,
        CallKind::MaxK,
        CallKind::MinK,
        CallKind::RowMaxK,
        CallKind::RowMinK,
        CallKind::Histogram,
        CallKind::Stats,
    ];

    fn from_code(code: u32) -> Option<CallKind> {
        Self::ALL.into_iter().find(|k| *k as u32 == code)
    }
}

/// What a rank says about its part of a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub call: CallKind,
    pub elem: Elem,
    /// The communicator size this rank sees.
    pub size: u32,
    /// This rank's shard: elements (device-wide calls) or columns of each row (per-row calls).
    pub len: u64,
    /// The call's parameters, equal on every rank (k, rows, the histogram's bins and range bits).
    pub params: [u64; 3],
    /// The rank's GPU.
    pub uuid: [u8; 16],
    /// The rank's local part failed (it returns its own error; the others say which rank failed).
    pub failed: bool,
}

const MAGIC: u32 = u32::from_le_bytes(*b"shrd");
/// The bit of the call word that says the rank's local part failed.
const FAILED: u32 = 1 << 31;
const HEADER_BYTES: usize = 64;
/// Bytes of result a record carries inline: enough for every scalar result (a sum, an argmax, the
/// statistics' accumulator), so those calls need one collective.
pub(crate) const INLINE_BYTES: usize = 128;
const RECORD_BYTES: usize = HEADER_BYTES + INLINE_BYTES;

impl Header {
    fn encode(&self, out: &mut Vec<u8>) {
        let call = self.call as u32 | if self.failed { FAILED } else { 0 };
        for word in [MAGIC, call, self.elem.ordinal() as u32, self.size] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        for word in [self.len, self.params[0], self.params[1], self.params[2]] {
            out.extend_from_slice(&word.to_le_bytes());
        }
        out.extend_from_slice(&self.uuid);
    }

    fn decode(b: &[u8], rank: usize) -> Result<Header> {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        let garbled = || Error::Collective(format!("rank {rank} sent a garbled record"));
        if u32_at(0) != MAGIC {
            return Err(garbled());
        }
        Ok(Header {
            call: CallKind::from_code(u32_at(4) & !FAILED).ok_or_else(garbled)?,
            failed: u32_at(4) & FAILED != 0,
            elem: *Elem::ALL.get(u32_at(8) as usize).ok_or_else(garbled)?,
            size: u32_at(12),
            len: u64_at(16),
            params: [u64_at(24), u64_at(32), u64_at(40)],
            uuid: b[48..64].try_into().expect("16 bytes"),
        })
    }
}

/// Every rank's header and inline bytes, in rank order.
pub(crate) struct Exchanged {
    pub headers: Vec<Header>,
    pub inline: Vec<Vec<u8>>,
}

impl Exchanged {
    /// Each rank's first element's global index (the shards lie in rank order).
    pub fn offsets(&self) -> Vec<u64> {
        let mut at = 0u64;
        self.headers
            .iter()
            .map(|h| {
                let o = at;
                at = at.wrapping_add(h.len);
                o
            })
            .collect()
    }

    /// The length of the concatenated input.
    pub fn total(&self) -> u64 {
        self.headers.iter().map(|h| h.len).sum()
    }
}

/// Sends `mine` and up to [`INLINE_BYTES`] of this rank's local result to every rank, receives theirs,
/// and checks that all ranks are in the same call: every rank gets the same error from the same records.
/// A rank whose local part failed (`local` is an error) still takes part, so that no rank waits for it;
/// it returns its own error, the others say that it failed.
pub(crate) fn exchange(
    comm: &mut impl Communicator,
    mine: &Header,
    local: Result<Vec<u8>>,
) -> Result<Exchanged> {
    let (inline, failure) = match local {
        Ok(bytes) => (bytes, None),
        Err(e) => (Vec::new(), Some(e)),
    };
    assert!(inline.len() <= INLINE_BYTES, "inline result too long");
    let mut record = Vec::with_capacity(RECORD_BYTES);
    Header {
        failed: failure.is_some(),
        ..*mine
    }
    .encode(&mut record);
    record.extend_from_slice(&inline);
    record.resize(RECORD_BYTES, 0);
    let all = comm.all_gather(&record)?;
    if let Some(e) = failure {
        return Err(e);
    }
    if all.len() != RECORD_BYTES * comm.size() {
        return Err(Error::Collective(format!(
            "all_gather returned {} bytes for {} ranks of {RECORD_BYTES}",
            all.len(),
            comm.size()
        )));
    }
    let mut headers = Vec::with_capacity(comm.size());
    let mut inlines = Vec::with_capacity(comm.size());
    for (rank, r) in all.chunks_exact(RECORD_BYTES).enumerate() {
        headers.push(Header::decode(&r[..HEADER_BYTES], rank)?);
        inlines.push(r[HEADER_BYTES..].to_vec());
    }
    if let Some(rank) = headers.iter().position(|h| h.failed) {
        return Err(failed_rank(rank));
    }
    check(&headers, comm.ranks_may_share_gpus())?;
    Ok(Exchanged {
        headers,
        inline: inlines,
    })
}

/// The error of the ranks whose part succeeded when rank `rank`'s failed.
pub(crate) fn failed_rank(rank: usize) -> Error {
    Error::Collective(format!(
        "rank {rank}'s part of the sharded call failed (its own call returned the error)"
    ))
}

/// That every rank is in the same call, with the same element type and parameters, over a communicator
/// of the size there are ranks, on distinct GPUs unless `share_gpus`. Compares against rank 0, so every
/// rank words the same error.
pub(crate) fn check(headers: &[Header], share_gpus: bool) -> Result<()> {
    let first = &headers[0];
    let bad = |why: String| Err(Error::InvalidArgument(format!("sharded call: {why}")));
    for (rank, h) in headers.iter().enumerate() {
        if h.size as usize != headers.len() {
            return bad(format!(
                "rank {rank}'s communicator has {} ranks, but {} took part",
                h.size,
                headers.len()
            ));
        }
        if h.call != first.call {
            return bad(format!(
                "rank {rank} called {:?} while rank 0 called {:?}",
                h.call, first.call
            ));
        }
        if h.elem != first.elem {
            return bad(format!(
                "rank {rank}'s shard holds {} while rank 0's holds {}",
                h.elem.word(),
                first.elem.word()
            ));
        }
        if h.params != first.params {
            return bad(format!(
                "rank {rank}'s parameters {:?} differ from rank 0's {:?}",
                h.params, first.params
            ));
        }
        if !share_gpus {
            if let Some(other) = headers[..rank].iter().position(|o| o.uuid == h.uuid) {
                return bad(format!("ranks {other} and {rank} are on the same GPU"));
            }
        }
    }
    Ok(())
}

/// Appends the bytes of `xs`.
pub(crate) fn put_elements<T: Element>(out: &mut Vec<u8>, xs: &[T]) {
    // SAFETY: element types are numbers or `repr(transparent)` 16-bit halves (`Element`'s contract):
    // every byte of them is initialised.
    let bytes = unsafe { std::slice::from_raw_parts(xs.as_ptr().cast::<u8>(), size_of_val(xs)) };
    out.extend_from_slice(bytes);
}

/// The elements in `bytes` (whose length is a multiple of the element's size).
pub(crate) fn get_elements<T: Element>(bytes: &[u8]) -> Vec<T> {
    bytes
        .chunks_exact(size_of::<T>())
        .map(get_element)
        .collect()
}

/// The element at the start of `bytes`.
pub(crate) fn get_element<T: Element>(bytes: &[u8]) -> T {
    assert!(bytes.len() >= size_of::<T>(), "record too short");
    // SAFETY: at least `size_of::<T>()` bytes, written by `put_elements` of the same type (the headers'
    // element types were checked equal); every bit pattern of an element type is a valid number.
    unsafe { bytes.as_ptr().cast::<T>().read_unaligned() }
}

/// The bytes of one plain value.
pub(crate) fn pod_bytes<P: Pod>(x: &P) -> Vec<u8> {
    // SAFETY: `Pod` types have no padding, so every byte is initialised.
    unsafe { std::slice::from_raw_parts((x as *const P).cast::<u8>(), size_of::<P>()) }.to_vec()
}

/// The plain value at the start of `bytes`.
pub(crate) fn pod_from<P: Pod>(bytes: &[u8]) -> P {
    assert!(bytes.len() >= size_of::<P>(), "record too short");
    // SAFETY: at least `size_of::<P>()` bytes, written by `pod_bytes` of the same type; `Pod` types are
    // plain numbers, valid for every bit pattern.
    unsafe { bytes.as_ptr().cast::<P>().read_unaligned() }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(rank: u8) -> Header {
        Header {
            call: CallKind::ArgMax,
            elem: Elem::F32,
            size: 3,
            len: 10 * rank as u64,
            params: [0; 3],
            uuid: [rank; 16],
            failed: false,
        }
    }

    #[test]
    fn headers_round_trip() {
        for call in CallKind::ALL {
            for &elem in Elem::ALL {
                let h = Header {
                    call,
                    elem,
                    size: 7,
                    len: u64::MAX - 3,
                    params: [1, 2, 3],
                    uuid: [9; 16],
                    failed: call == CallKind::Stats,
                };
                let mut b = Vec::new();
                h.encode(&mut b);
                assert_eq!(b.len(), HEADER_BYTES);
                assert_eq!(Header::decode(&b, 0).unwrap(), h);
            }
        }
        assert!(matches!(
            Header::decode(&[0; HEADER_BYTES], 2),
            Err(Error::Collective(_))
        ));
    }

    #[test]
    fn mismatched_calls_are_invalid_arguments() {
        let good: Vec<Header> = (0..3).map(header).collect();
        check(&good, false).unwrap();
        type Spoil = fn(&mut Header);
        let cases: [(&str, Spoil); 5] = [
            ("communicator", |h| h.size = 2),
            ("called", |h| h.call = CallKind::ArgMin),
            ("holds f64", |h| h.elem = Elem::F64),
            ("parameters", |h| h.params[0] = 5),
            ("same GPU", |h| h.uuid = [0; 16]),
        ];
        for (what, spoil) in cases {
            let mut headers = good.clone();
            spoil(&mut headers[2]);
            let e = check(&headers, false).unwrap_err();
            assert!(
                matches!(&e, Error::InvalidArgument(m) if m.contains(what)),
                "{what}: {e}"
            );
        }
        let mut shared = good.clone();
        shared[1].uuid = shared[0].uuid;
        check(&shared, true).unwrap();
    }

    #[test]
    fn element_and_plain_bytes_round_trip() {
        let xs = [1.5f32, -0.0, f32::NAN, f32::INFINITY];
        let mut b = Vec::new();
        put_elements(&mut b, &xs);
        let back: Vec<f32> = get_elements(&b);
        assert_eq!(
            back.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            xs.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
        );
        let m = reduce_contract::stats::Moments {
            n: 3.0,
            mean: 2.5,
            m2: 0.25,
        };
        assert_eq!(
            pod_from::<reduce_contract::stats::Moments>(&pod_bytes(&m)),
            m
        );
    }
}
