//! [`DeviceSelect`]: stream compaction — copy the elements that pass a test to the front of an output
//! buffer and count them — unordered (warp-aggregated atomics) or stable (single pass, decoupled look-back).
use std::ffi::{CString, c_void};

use cust::memory::{DeviceBuffer, DeviceSlice};
use cust::stream::Stream;

use crate::driver::{self, Launch};
use crate::element::Element;
use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::last_use::LastUse;
use crate::reduce::SMEM_BYTES;
use crate::tuning::{self, Policy};

/// Vectors of 16 bytes each thread handles per tile of the stable kernels; must match kernels-gpu's
/// `select::STABLE_VECTORS` (a CPU test checks).
pub const STABLE_VECTORS: u64 = 4;

/// Where the stable kernels' staging area starts in shared memory; must match kernels-gpu's
/// `select::STAGE_OFFSET` (a CPU test checks). A tile's kept elements are compacted there before they are
/// written out, so the global writes are whole contiguous runs.
pub const STAGE_OFFSET: u32 = 384;

/// Dynamic shared memory a block may use without opting in.
const SHARED_LIMIT: u32 = 48 * 1024;

mod sealed {
    pub trait Sealed {}
}

/// Element types the compaction kernels are built for.
pub trait SelectElement: Element {
    /// The bits of a kernel parameter of this type, in the low bytes of a `u64` (the launch passes the
    /// address of this word).
    fn param_bits(self) -> u64;
}

impl SelectElement for f32 {
    fn param_bits(self) -> u64 {
        self.to_bits() as u64
    }
}

/// A test on one element that selects it, mirrored by a device type of the same name. The kernel of a
/// `(predicate, element)` pair is `select_{unordered,stable}_<TAG>_<element>`; the threshold, when the test
/// has one, is a kernel parameter.
pub trait Predicate<T: SelectElement>: Copy + sealed::Sealed {
    /// Name used in kernel symbols, e.g. `"gt"`.
    const TAG: &'static str;
    /// The value passed as the kernel's `threshold` parameter.
    fn threshold(&self) -> T;
}

/// Keeps `x > self.0`. NaN is never kept (it compares false).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GreaterThan<T>(pub T);
/// Keeps `x < self.0`. NaN is never kept.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LessThan<T>(pub T);
/// Keeps `x != 0`: -0.0 and +0.0 are dropped, NaN is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NonZero;
/// Keeps finite values: NaN and ±∞ are dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IsFinite;

impl<T> sealed::Sealed for GreaterThan<T> {}
impl<T> sealed::Sealed for LessThan<T> {}
impl sealed::Sealed for NonZero {}
impl sealed::Sealed for IsFinite {}

impl<T: SelectElement> Predicate<T> for GreaterThan<T> {
    const TAG: &'static str = "gt";
    fn threshold(&self) -> T {
        self.0
    }
}

impl<T: SelectElement> Predicate<T> for LessThan<T> {
    const TAG: &'static str = "lt";
    fn threshold(&self) -> T {
        self.0
    }
}

impl<T: SelectElement> Predicate<T> for NonZero {
    const TAG: &'static str = "nonzero";
    fn threshold(&self) -> T {
        T::default()
    }
}

impl Predicate<f32> for IsFinite {
    const TAG: &'static str = "finite";
    fn threshold(&self) -> f32 {
        0.0
    }
}

/// Names every compaction kernel: the CPU tests check each one is in every PTX module.
pub fn select_kernels() -> Vec<CString> {
    fn pair<T: SelectElement, P: Predicate<T>>() -> [CString; 2] {
        [
            kernel_name("unordered", P::TAG, T::NAME),
            kernel_name("stable", P::TAG, T::NAME),
        ]
    }
    let mut v = Vec::new();
    v.extend(pair::<f32, GreaterThan<f32>>());
    v.extend(pair::<f32, LessThan<f32>>());
    v.extend(pair::<f32, NonZero>());
    v.extend(pair::<f32, IsFinite>());
    v.push(flagged_name(f32::NAME));
    v
}

fn kernel_name(kind: &str, tag: &str, element: &str) -> CString {
    CString::new(format!("select_{kind}_{tag}_{element}")).expect("kernel names hold no NUL")
}

fn flagged_name(element: &str) -> CString {
    CString::new(format!("select_flagged_{element}")).expect("kernel names hold no NUL")
}

/// What decides which elements are kept, and whether their order is kept.
enum Selection {
    /// By a predicate, output order unspecified.
    Unordered { kernel: CString, threshold: u64 },
    /// By a predicate, in input order.
    Stable { kernel: CString, threshold: u64 },
    /// By a byte mask, in input order.
    Flagged { kernel: CString, flags: u64 },
}

impl Selection {
    fn by<T: SelectElement, P: Predicate<T>>(stable: bool, pred: &P) -> Self {
        let threshold = pred.threshold().param_bits();
        if stable {
            Selection::Stable {
                kernel: kernel_name("stable", P::TAG, T::NAME),
                threshold,
            }
        } else {
            Selection::Unordered {
                kernel: kernel_name("unordered", P::TAG, T::NAME),
                threshold,
            }
        }
    }
}

/// Stream compaction on `cust` device memory: copies the elements of `input` that pass a test to the front
/// of `out` and returns how many there are.
///
/// - [`select_if`](Self::select_if) is the fastest: each warp reserves room for its elements with one
///   atomic add. **The order of the output is unspecified** and may change from run to run.
/// - [`select_if_stable`](Self::select_if_stable) and [`select_flagged`](Self::select_flagged) keep the
///   input order, in a single pass over the input (decoupled look-back).
///
/// `out` must hold at least `input.len()` elements; only the first `count` are written. Inputs may be any
/// sub-slice (any offset and length); lengths and counts are 64-bit. The handle keeps its stream and
/// scratch, so repeated calls do not allocate (the stable scratch grows to the largest input seen).
///
/// ```no_run
/// use cust::memory::{CopyDestination, DeviceBuffer};
/// use reduce_host::{DeviceSelect, GreaterThan};
///
/// let mut select = DeviceSelect::new()?;
/// let x = DeviceBuffer::from_slice(&[0.5f32, -1.0, 2.0, 0.0, 3.5])?;
/// let mut out = DeviceBuffer::from_slice(&[0.0f32; 5])?;
/// let kept = select.select_if_stable(&x, GreaterThan(0.25), &mut out)?;
/// let mut host = [0.0f32; 5];
/// out.copy_to(&mut host[..])?;
/// assert_eq!(&host[..kept as usize], &[0.5, 2.0, 3.5]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct DeviceSelect {
    /// Where blocking calls have the count written.
    count: DeviceBuffer<u64>,
    tiles: Scratch,
    stream: Stream,
    policy: Policy,
    // Declared last: the context outlives the buffers and stream above.
    gpu: Gpu,
}

handle_basics!(DeviceSelect);

impl DeviceSelect {
    /// A handle on an opened device; several handles can share one [`Gpu`].
    pub fn with_gpu(gpu: &Gpu) -> Result<Self> {
        let stream = gpu.stream()?;
        Ok(DeviceSelect {
            count: DeviceBuffer::zeroed(1)?,
            tiles: Scratch {
                states: DeviceBuffer::zeroed(1)?,
                last_use: LastUse::new()?,
            },
            stream,
            policy: Policy {
                threads: tuning::SELECT_THREADS,
                ..tuning::policy(gpu.info().cc())
            },
            gpu: gpu.clone(),
        })
    }

    /// The launch policy in use (from the tuning table for this device unless set).
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Forces a launch policy, e.g. to test odd block sizes: `threads` must be a multiple of 32 in
    /// 32..=1024 and `blocks_per_sm` at least 1 (`finalize_threads` is not used here). The stable kernels
    /// use at most 736 threads, whose tile still fits the 48 KiB of shared memory a block gets.
    pub fn set_policy(&mut self, policy: Policy) -> Result<()> {
        if !policy.threads.is_multiple_of(32) || !(32..=1024).contains(&policy.threads) {
            return Err(Error::InvalidArgument(format!(
                "{policy:?}: threads must be a multiple of 32 in 32..=1024"
            )));
        }
        if policy.blocks_per_sm == 0 {
            return Err(Error::InvalidArgument(format!(
                "{policy:?}: blocks_per_sm must be at least 1"
            )));
        }
        self.policy = policy;
        Ok(())
    }

    /// Copies the elements of `input` that pass `pred` to `out[..count]` **in unspecified order** and
    /// returns `count`. `out` must hold at least `input.len()` elements.
    pub fn select_if<T: SelectElement, P: Predicate<T>>(
        &mut self,
        input: &DeviceSlice<T>,
        pred: P,
        out: &mut DeviceSlice<T>,
    ) -> Result<u64> {
        self.blocking(Selection::by(false, &pred), input, out)
    }

    /// Copies the elements of `input` that pass `pred` to `out[..count]` in input order and returns
    /// `count`. `out` must hold at least `input.len()` elements.
    pub fn select_if_stable<T: SelectElement, P: Predicate<T>>(
        &mut self,
        input: &DeviceSlice<T>,
        pred: P,
        out: &mut DeviceSlice<T>,
    ) -> Result<u64> {
        self.blocking(Selection::by(true, &pred), input, out)
    }

    /// Copies `input[i]` for every `i` with `flags[i] != 0` to `out[..count]` in input order and returns
    /// `count`. `flags` must be as long as `input`, and `out` at least as long.
    pub fn select_flagged<T: SelectElement>(
        &mut self,
        input: &DeviceSlice<T>,
        flags: &DeviceSlice<u8>,
        out: &mut DeviceSlice<T>,
    ) -> Result<u64> {
        self.blocking(Self::flagged::<T>(input, flags)?, input, out)
    }

    /// Enqueues [`select_if`](Self::select_if) on `stream`, with the count written to `count[0]`, and
    /// returns without waiting.
    ///
    /// # Safety
    /// `input`, `out` and `count` must stay allocated, `input` unmodified and `out`/`count` untouched by
    /// other work, until `stream` has passed this work.
    pub unsafe fn select_if_async<T: SelectElement, P: Predicate<T>>(
        &mut self,
        input: &DeviceSlice<T>,
        pred: P,
        out: &mut DeviceSlice<T>,
        count: &mut DeviceSlice<u64>,
        stream: &Stream,
    ) -> Result<()> {
        self.enqueue_into(Selection::by(false, &pred), input, out, count, stream)
    }

    /// Enqueues [`select_if_stable`](Self::select_if_stable) on `stream`, with the count written to
    /// `count[0]`, and returns without waiting.
    ///
    /// # Safety
    /// As [`select_if_async`](Self::select_if_async).
    pub unsafe fn select_if_stable_async<T: SelectElement, P: Predicate<T>>(
        &mut self,
        input: &DeviceSlice<T>,
        pred: P,
        out: &mut DeviceSlice<T>,
        count: &mut DeviceSlice<u64>,
        stream: &Stream,
    ) -> Result<()> {
        self.enqueue_into(Selection::by(true, &pred), input, out, count, stream)
    }

    /// Enqueues [`select_flagged`](Self::select_flagged) on `stream`, with the count written to `count[0]`,
    /// and returns without waiting.
    ///
    /// # Safety
    /// As [`select_if_async`](Self::select_if_async); `flags` too must stay allocated and unmodified.
    pub unsafe fn select_flagged_async<T: SelectElement>(
        &mut self,
        input: &DeviceSlice<T>,
        flags: &DeviceSlice<u8>,
        out: &mut DeviceSlice<T>,
        count: &mut DeviceSlice<u64>,
        stream: &Stream,
    ) -> Result<()> {
        self.enqueue_into(Self::flagged::<T>(input, flags)?, input, out, count, stream)
    }

    fn flagged<T: SelectElement>(
        input: &DeviceSlice<T>,
        flags: &DeviceSlice<u8>,
    ) -> Result<Selection> {
        if flags.len() != input.len() {
            return Err(Error::InvalidArgument(format!(
                "flags hold {} bytes for {} elements; they must be as long as the input",
                flags.len(),
                input.len()
            )));
        }
        Ok(Selection::Flagged {
            kernel: flagged_name(T::NAME),
            flags: flags.as_device_ptr().as_raw(),
        })
    }

    fn blocking<T: SelectElement>(
        &mut self,
        selection: Selection,
        input: &DeviceSlice<T>,
        out: &mut DeviceSlice<T>,
    ) -> Result<u64> {
        self.gpu.make_current()?;
        let count = self.count.as_device_ptr().as_raw();
        self.enqueue(selection, input, out, count, None)?;
        // SAFETY: the kernels just enqueued write the count, a u64, on the handle's stream.
        unsafe { driver::read_back::<u64>(count, &self.stream) }
    }

    fn enqueue_into<T: SelectElement>(
        &mut self,
        selection: Selection,
        input: &DeviceSlice<T>,
        out: &mut DeviceSlice<T>,
        count: &mut DeviceSlice<u64>,
        stream: &Stream,
    ) -> Result<()> {
        if count.is_empty() {
            return Err(Error::InvalidArgument(
                "the count slice must hold at least one element".into(),
            ));
        }
        self.gpu.make_current()?;
        self.enqueue(
            selection,
            input,
            out,
            count.as_device_ptr().as_raw(),
            Some(stream),
        )
    }

    /// The dispatch: checks the arguments, sizes the grid and launches on `stream` (the handle's if none).
    fn enqueue<T: SelectElement>(
        &mut self,
        selection: Selection,
        input: &DeviceSlice<T>,
        out: &mut DeviceSlice<T>,
        count: u64,
        stream: Option<&Stream>,
    ) -> Result<()> {
        let stream = stream.unwrap_or(&self.stream);
        let size = std::mem::size_of::<T>() as u64;
        let mut n = input.len() as u64;
        let mut input_ptr = input.as_device_ptr().as_raw();
        let mut out_ptr = out.as_device_ptr().as_raw();
        if (out.len() as u64) < n {
            return Err(Error::InvalidArgument(format!(
                "the output holds {} elements; it must hold at least the input's {n}",
                out.len()
            )));
        }
        for (what, p) in [("input", input_ptr), ("output", out_ptr)] {
            if n > 0 && (p == 0 || p % std::mem::align_of::<T>() as u64 != 0) {
                return Err(Error::InvalidArgument(format!(
                    "{what} address {p:#x} is null or not aligned to its {}-byte element",
                    std::mem::align_of::<T>()
                )));
            }
        }
        let mut count = count;
        if n == 0 {
            // Nothing to launch; the count is 0.
            // SAFETY: `count` is valid for one u64 (the handle's slot or a non-empty slice).
            return unsafe { driver::memset_zero(count, 8, stream) };
        }
        let mut policy = self.policy;
        let arg = |p: &mut u64| p as *mut u64 as *mut c_void;
        let (name, mut param) = match &selection {
            Selection::Unordered { kernel, threshold }
            | Selection::Stable { kernel, threshold } => (kernel, *threshold),
            Selection::Flagged { kernel, flags } => (kernel, *flags),
        };
        let f = self.gpu.function(name)?;
        // The kernel's registers may cap its block size below the policy's: size everything (grid, tiles)
        // for the block it can actually launch.
        policy.threads = driver::fit_block(f, policy.threads)?;
        if !matches!(selection, Selection::Unordered { .. }) {
            policy.threads = stable_threads(policy.threads);
        }
        self.tiles.last_use.acquire(stream)?;
        let launched = (|| match selection {
            Selection::Unordered { .. } => {
                // Grid-stride: one resident wave at most, so no block runs alone at the end.
                let resident = driver::max_active_blocks(f, policy.threads, SMEM_BYTES)?.max(1);
                let policy = Policy {
                    blocks_per_sm: policy.blocks_per_sm.min(resident),
                    ..policy
                };
                let grid = tuning::grid_for(&policy, self.gpu.info().sm_count, n, size as usize);
                let shape = Launch {
                    grid,
                    block: policy.threads,
                    shared_bytes: SMEM_BYTES,
                };
                // SAFETY: the arguments match `select_unordered_*` (input, n, threshold: T in the low
                // bytes of a u64, out, count); `input` is valid for n reads, `out` for n writes (checked
                // above), `count` for one u64, zeroed first as the kernel requires.
                unsafe {
                    driver::memset_zero(count, 8, stream)?;
                    driver::launch(
                        f,
                        shape,
                        stream,
                        &mut [
                            arg(&mut input_ptr),
                            arg(&mut n),
                            arg(&mut param),
                            arg(&mut out_ptr),
                            arg(&mut count),
                        ],
                    )
                }
            }
            Selection::Stable { .. } | Selection::Flagged { .. } => {
                let (shape, mut states) =
                    self.tiles.prepare(&policy, input_ptr, n, size, stream)?;
                let mut args = [
                    arg(&mut input_ptr),
                    arg(&mut n),
                    arg(&mut param),
                    arg(&mut out_ptr),
                    arg(&mut count),
                    arg(&mut states),
                ];
                if matches!(selection, Selection::Flagged { .. }) {
                    // `select_flagged_*` takes its flags before `n`.
                    args.swap(1, 2);
                }
                // SAFETY: the arguments match `select_stable_*` (input, n, threshold, out, count, states)
                // or `select_flagged_*` (input, flags, n, out, count, states); `flags` holds n bytes
                // (checked by `flagged`); `states` holds `1 + grid` zeroed words and the grid is one block
                // per tile.
                unsafe { driver::launch(f, shape, stream, &mut args) }
            }
        })();
        // Record the use even after a failed launch, so a later call orders after whatever did run.
        self.tiles.last_use.release(stream)?;
        launched
    }
}

/// Device temporaries: the look-back words of the stable kernels, and the event that orders their reuse
/// across streams.
struct Scratch {
    /// The tile counter, then one word per tile.
    states: DeviceBuffer<u64>,
    last_use: LastUse,
}

impl Scratch {
    /// Sizes the stable kernels' grid (one block per tile) and zeroes `1 + tiles` look-back words on
    /// `stream`, growing the buffer first if needed. Returns the launch shape and the words' address.
    fn prepare(
        &mut self,
        policy: &Policy,
        input_ptr: u64,
        n: u64,
        size: u64,
        stream: &Stream,
    ) -> Result<(Launch, u64)> {
        let tiles = stable_tiles(policy, input_ptr, n, size);
        let grid = u32::try_from(tiles)
            .ok()
            .filter(|&g| g <= i32::MAX as u32)
            .ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "{n} elements need {tiles} tiles, more than a grid can hold; split the input"
                ))
            })?;
        let words = tiles as usize + 1;
        if self.states.len() < words {
            // The old buffer may still be in use by earlier work on any stream.
            self.last_use.synchronize()?;
            self.states = DeviceBuffer::zeroed(words.next_power_of_two())?;
        }
        let states = self.states.as_device_ptr().as_raw();
        // SAFETY: the buffer holds at least `words` u64s; the stream is ordered after its last use.
        unsafe { driver::memset_zero(states, words * 8, stream)? };
        let shape = Launch {
            grid,
            block: policy.threads,
            shared_bytes: stable_shared_bytes(policy.threads),
        };
        Ok((shape, states))
    }
}

/// `threads` capped so a stable block's staging (a whole tile) fits the shared memory a block gets without
/// opting in: at most 736.
fn stable_threads(threads: u32) -> u32 {
    let most = (SHARED_LIMIT - STAGE_OFFSET) / (STABLE_VECTORS as u32 * 16) / 32 * 32;
    threads.min(most)
}

/// Dynamic shared memory of a stable block of `threads`: the scan's words, then a whole tile of staging.
fn stable_shared_bytes(threads: u32) -> u32 {
    STAGE_OFFSET + threads * STABLE_VECTORS as u32 * 16
}

/// Tiles of the stable kernels for `n` elements of `size` bytes at `addr`: the input is cut into 16-byte
/// vectors from the aligned address at or below it, and a tile is `threads × STABLE_VECTORS` vectors.
pub fn stable_tiles(policy: &Policy, addr: u64, n: u64, size: u64) -> u64 {
    let lanes = 16 / size;
    let head = (addr % 16) / size;
    let vectors = (head + n).div_ceil(lanes);
    vectors.div_ceil(policy.threads as u64 * STABLE_VECTORS)
}

impl Drop for DeviceSelect {
    fn drop(&mut self) {
        // The fields free device memory: make their context current first. Nothing to report a failure to.
        let _ = self.gpu.make_current();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stable_blocks_stage_a_whole_tile_within_48_kib() {
        assert_eq!(stable_threads(tuning::SELECT_THREADS), 512);
        assert_eq!(stable_threads(1024), 736);
        assert_eq!(stable_threads(32), 32);
        for threads in (32..=1024).step_by(32) {
            let t = stable_threads(threads);
            assert!(t.is_multiple_of(32) && t <= threads);
            assert!(stable_shared_bytes(t) <= SHARED_LIMIT, "{t} threads");
            // Tiles start past the scan's words, 16-byte aligned for the staged elements.
            assert!(STAGE_OFFSET.is_multiple_of(16));
        }
    }

    #[test]
    fn tiles_cover_every_vector_of_the_slice() {
        let policy = Policy {
            threads: 512,
            blocks_per_sm: 1,
            finalize_threads: 256,
        };
        // 512 × 4 vectors = 8192 f32 per tile; a slice starting 4 bytes past a 16-byte boundary has one
        // element in the vector before, so it reaches a second tile one element sooner.
        assert_eq!(stable_tiles(&policy, 0, 8192, 4), 1);
        assert_eq!(stable_tiles(&policy, 0, 8193, 4), 2);
        assert_eq!(stable_tiles(&policy, 4, 8191, 4), 1);
        assert_eq!(stable_tiles(&policy, 4, 8192, 4), 2);
    }
}
