//! [`NcclCommunicator`]: the [`Communicator`] of real deployments, on NCCL through cudarc's bindings, one
//! GPU per rank, in one process ([`NcclCommunicator::group`]) or one process per GPU
//! ([`NcclCommunicator::from_rank`] with an [`NcclId`] the user distributes).
//!
//! NCCL is loaded at run time (`libnccl.so`, found the way cudarc looks for it: on `LD_LIBRARY_PATH`
//! under `libnccl.so` or `libnccl.so.1`/`.9`–`.12`; the pip wheel `nvidia-nccl-cu12` ships
//! `libnccl.so.2`, which needs a `libnccl.so` link beside it). Without it, making a communicator is an
//! [`Error::Collective`], never a panic.
//!
//! **Errors, not hangs.** NCCL's collectives run on the GPU; a peer that died or a broken link would leave
//! them waiting forever. So after enqueuing a collective this rank polls the stream and NCCL's
//! asynchronous error (`ncclCommGetAsyncError`), and on an error, or when
//! [`timeout`](Self::set_timeout) passes (60 s by default), aborts the communicator
//! (`ncclCommAbort`, which frees the GPU from the stuck kernel) and returns [`Error::Collective`]. An
//! aborted communicator fails every later call; make a new one.
use std::ffi::CStr;
use std::time::{Duration, Instant};

use cudarc::nccl::sys;
use cust::memory::DeviceBuffer;
use cust::stream::{Stream, StreamFlags};

use super::communicator::Communicator;
use crate::error::{Error, Result, check};
use crate::gpu::Gpu;
use crate::pinned::Pinned;
use crate::stream::StreamRef;

/// The unique id that ties the ranks of one communicator together: made by one rank
/// ([`NcclId::new`]), sent to the others by the program's own means (its 128 bytes, [`as_bytes`]), and
/// passed to [`NcclCommunicator::from_rank`] on every rank.
///
/// [`as_bytes`]: NcclId::as_bytes
#[derive(Clone, Copy)]
pub struct NcclId([u8; 128]);

impl NcclId {
    /// A new id (`ncclGetUniqueId`), on the rank that starts the group.
    pub fn new() -> Result<NcclId> {
        ensure_loaded()?;
        let mut id = sys::ncclUniqueId { internal: [0; 128] };
        // SAFETY: NCCL writes the 128 bytes of `id`.
        nccl(unsafe { sys::ncclGetUniqueId(&mut id) }, "ncclGetUniqueId")?;
        Ok(NcclId(id.internal.map(|c| c as u8)))
    }

    /// The id from the bytes another rank sent.
    pub fn from_bytes(bytes: [u8; 128]) -> NcclId {
        NcclId(bytes)
    }

    /// The bytes to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8; 128] {
        &self.0
    }
}

/// One rank of an NCCL communicator, on one GPU.
///
/// The [`Communicator`] of real deployments, on NCCL through cudarc's bindings, one
/// GPU per rank, in one process ([`NcclCommunicator::group`]) or one process per GPU
/// ([`NcclCommunicator::from_rank`] with an [`NcclId`] the user distributes).
///
/// NCCL is loaded at run time (`libnccl.so`, found the way cudarc looks for it: on `LD_LIBRARY_PATH`
/// under `libnccl.so` or `libnccl.so.1`/`.9`–`.12`; the pip wheel `nvidia-nccl-cu12` ships
/// `libnccl.so.2`, which needs a `libnccl.so` link beside it). Without it, making a communicator is an
/// [`Error::Collective`], never a panic.
///
/// **Errors, not hangs.** NCCL's collectives run on the GPU; a peer that died or a broken link would leave
/// them waiting forever. So after enqueuing a collective this rank polls the stream and NCCL's
/// asynchronous error (`ncclCommGetAsyncError`), and on an error, or when
/// [`timeout`](Self::set_timeout) passes (60 s by default), aborts the communicator
/// (`ncclCommAbort`, which frees the GPU from the stuck kernel) and returns [`Error::Collective`]. An
/// aborted communicator fails every later call; make a new one.
pub struct NcclCommunicator {
    comm: sys::ncclComm_t,
    rank: usize,
    size: usize,
    /// The collectives' stream, its own so that the host waits for them alone.
    stream: Stream,
    send: Option<DeviceBuffer<u8>>,
    recv: Option<DeviceBuffer<u8>>,
    /// Page-locked staging of what goes in and comes out, so both copies are plain DMA on the stream and
    /// one wait covers copy, collective and copy.
    staging_in: Option<Pinned>,
    staging_out: Option<Pinned>,
    timeout: Duration,
    aborted: bool,
    // Declared last: the context outlives the stream and buffers above.
    gpu: Gpu,
}

// SAFETY: an NCCL communicator may be used from any thread, one call at a time (NCCL's thread-safety
// rules); `&mut self` on every collective serialises the calls, and the cust stream and buffers are
// `Send`.
unsafe impl Send for NcclCommunicator {}

/// Whether cudarc finds the NCCL library, as an error if not.
fn ensure_loaded() -> Result<()> {
    // SAFETY: tries to open the library by cudarc's candidate names; nothing is called from it.
    if unsafe { sys::is_culib_present() } {
        Ok(())
    } else {
        Err(Error::Collective(
            "the NCCL library (libnccl.so) was not found on the library path".into(),
        ))
    }
}

/// An NCCL status as a `Result`.
fn nccl(r: sys::ncclResult_t, call: &str) -> Result<()> {
    if r == sys::ncclResult_t::ncclSuccess {
        return Ok(());
    }
    // SAFETY: NCCL returns a static NUL-terminated string for every status.
    let text = unsafe { CStr::from_ptr(sys::ncclGetErrorString(r)) };
    Err(Error::Collective(format!(
        "{call} failed: {} ({r:?})",
        text.to_string_lossy()
    )))
}

impl NcclCommunicator {
    /// Rank `rank` of `size`, on `gpu`, joining the ranks that pass the same `id` (`ncclCommInitRank`):
    /// one process per GPU, on one node or many (NCCL's own bootstrap connects them). Waits until all
    /// `size` ranks have joined.
    pub fn from_rank(gpu: &Gpu, rank: usize, size: usize, id: &NcclId) -> Result<Self> {
        ensure_loaded()?;
        if rank >= size {
            return Err(Error::InvalidArgument(format!(
                "rank {rank} of a communicator of {size}"
            )));
        }
        let ranks =
            i32::try_from(size).map_err(|_| Error::InvalidArgument("too many ranks".into()))?;
        let _current = gpu.make_current()?;
        let mut comm = std::ptr::null_mut();
        let id = sys::ncclUniqueId {
            internal: id.0.map(|b| b as _),
        };
        // SAFETY: NCCL writes the new communicator into `comm`; the device's context is current.
        nccl(
            unsafe { sys::ncclCommInitRank(&mut comm, ranks, id, rank as i32) },
            "ncclCommInitRank",
        )?;
        Self::wrap(gpu, comm, rank, size)
    }

    /// One communicator per GPU of `gpus`, all in this process (`ncclCommInitAll`): rank `r` is on
    /// `gpus[r]`. Move each to a thread of its own, with a [`ShardedReduce`](super::ShardedReduce) on
    /// the same GPU. Two entries on one GPU are an [`Error::InvalidArgument`].
    pub fn group(gpus: &[Gpu]) -> Result<Vec<Self>> {
        ensure_loaded()?;
        for (i, g) in gpus.iter().enumerate() {
            if let Some(j) = gpus[..i]
                .iter()
                .position(|o| o.info().uuid == g.info().uuid)
            {
                return Err(Error::InvalidArgument(format!(
                    "gpus {j} and {i} are the same device; a communicator takes one rank per GPU"
                )));
            }
        }
        let ordinals: Vec<i32> = gpus.iter().map(|g| g.info().ordinal as i32).collect();
        let mut comms = vec![std::ptr::null_mut(); gpus.len()];
        // SAFETY: NCCL writes one communicator per listed device into `comms`.
        nccl(
            unsafe {
                sys::ncclCommInitAll(comms.as_mut_ptr(), gpus.len() as i32, ordinals.as_ptr())
            },
            "ncclCommInitAll",
        )?;
        let size = gpus.len();
        let mut out = Vec::with_capacity(size);
        for (rank, (gpu, comm)) in gpus.iter().zip(comms).enumerate() {
            out.push(Self::wrap(gpu, comm, rank, size)?);
        }
        Ok(out)
    }

    fn wrap(gpu: &Gpu, comm: sys::ncclComm_t, rank: usize, size: usize) -> Result<Self> {
        let _current = gpu.make_current()?;
        let stream = match Stream::new(StreamFlags::NON_BLOCKING, None) {
            Ok(s) => s,
            Err(e) => {
                // SAFETY: `comm` was just made and is used nowhere else.
                unsafe { sys::ncclCommDestroy(comm) };
                return Err(e.into());
            }
        };
        Ok(NcclCommunicator {
            comm,
            rank,
            size,
            stream,
            send: None,
            recv: None,
            staging_in: None,
            staging_out: None,
            timeout: Duration::from_secs(60),
            aborted: false,
            gpu: gpu.clone(),
        })
    }

    /// How long a collective may take before the communicator is aborted and the call fails.
    pub fn set_timeout(&mut self, timeout: Duration) {
        self.timeout = timeout;
    }

    /// The send and receive buffers and their staging, grown to `send` and `recv` bytes.
    fn buffers(&mut self, send: usize, recv: usize) -> Result<(u64, u64)> {
        for (slot, bytes) in [(&mut self.send, send), (&mut self.recv, recv)] {
            if slot.as_ref().is_none_or(|b| b.len() < bytes) {
                *slot = None;
                *slot = Some(crate::driver::zeroed(bytes.max(1))?);
            }
        }
        for (slot, bytes) in [(&mut self.staging_in, send), (&mut self.staging_out, recv)] {
            if slot.as_ref().is_none_or(|b| b.len() < bytes) {
                *slot = None;
                *slot = Some(Pinned::new(bytes.max(1))?);
            }
        }
        let raw =
            |b: &Option<DeviceBuffer<u8>>| b.as_ref().expect("allocated").as_device_ptr().as_raw();
        Ok((raw(&self.send), raw(&self.recv)))
    }

    /// Runs one collective: copies `mine` in, enqueues `collective(send, recv, stream)`, waits for it
    /// (polling NCCL's errors, aborting on an error or the timeout) and copies `out` back.
    fn run(
        &mut self,
        mine: &[u8],
        out: &mut [u8],
        collective: impl FnOnce(u64, u64, sys::cudaStream_t) -> sys::ncclResult_t,
        name: &str,
    ) -> Result<()> {
        if self.aborted {
            return Err(Error::Collective(
                "the communicator was aborted by an earlier failure".into(),
            ));
        }
        let _current = self.gpu.make_current()?;
        let (send, recv) = self.buffers(mine.len(), out.len())?;
        let stream = StreamRef::from(&self.stream);
        let staging_in = self.staging_in.as_ref().expect("allocated").as_mut_ptr();
        let staging_out = self.staging_out.as_ref().expect("allocated").as_mut_ptr();
        // SAFETY: the staging holds at least `mine.len()` bytes and no copy of the stream uses it (the
        // last collective was waited for).
        unsafe {
            std::ptr::copy_nonoverlapping(mine.as_ptr(), staging_in.cast::<u8>(), mine.len())
        };
        if !mine.is_empty() {
            // SAFETY: `send` and the page-locked staging hold at least `mine.len()` bytes; the staging is
            // not touched again until the stream has passed this copy.
            check(unsafe {
                cust::sys::cuMemcpyHtoDAsync_v2(send, staging_in, mine.len(), stream.as_raw())
            })?;
        }
        nccl(collective(send, recv, stream.as_raw().cast()), name)?;
        if !out.is_empty() {
            // SAFETY: `recv` and the staging hold at least `out.len()` bytes; the host reads the staging
            // only after `wait` has seen the stream pass this copy.
            check(unsafe {
                cust::sys::cuMemcpyDtoHAsync_v2(staging_out, recv, out.len(), stream.as_raw())
            })?;
        }
        self.wait(name)?;
        // SAFETY: the stream has finished the copy into the staging, which holds `out.len()` bytes.
        unsafe {
            std::ptr::copy_nonoverlapping(staging_out.cast::<u8>(), out.as_mut_ptr(), out.len())
        };
        Ok(())
    }

    /// Waits for the stream, polling NCCL's asynchronous error; aborts on an error or the timeout.
    fn wait(&mut self, name: &str) -> Result<()> {
        let start = Instant::now();
        loop {
            // SAFETY: the stream is live.
            let r = unsafe { cust::sys::cuStreamQuery(self.stream.as_inner()) };
            match r {
                cust::sys::CUresult::CUDA_SUCCESS => return Ok(()),
                cust::sys::CUresult::CUDA_ERROR_NOT_READY => {}
                other => return Err(check(other).unwrap_err().into()),
            }
            let mut status = sys::ncclResult_t::ncclSuccess;
            // SAFETY: the communicator is live (not aborted); NCCL writes one status.
            nccl(
                unsafe { sys::ncclCommGetAsyncError(self.comm, &mut status) },
                "ncclCommGetAsyncError",
            )?;
            let failed = status != sys::ncclResult_t::ncclSuccess
                && status != sys::ncclResult_t::ncclInProgress;
            let late = start.elapsed() > self.timeout;
            if failed || late {
                self.abort();
                return Err(Error::Collective(if late {
                    format!(
                        "{name} did not finish within {:?}; the communicator was aborted",
                        self.timeout
                    )
                } else {
                    format!("{name}: NCCL reported {status:?}; the communicator was aborted")
                }));
            }
            if start.elapsed() < Duration::from_millis(1) {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }

    fn abort(&mut self) {
        if !self.aborted {
            // SAFETY: the communicator is live; abort frees it and stops its kernels.
            unsafe { sys::ncclCommAbort(self.comm) };
            self.aborted = true;
        }
    }
}

impl Communicator for NcclCommunicator {
    fn rank(&self) -> usize {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<u8>> {
        let mut out = vec![0u8; mine.len() * self.size];
        let comm = self.comm;
        let len = mine.len();
        self.run(
            mine,
            &mut out,
            // SAFETY: `send` holds `len` bytes and `recv` `len · size`, on this rank's GPU.
            |send, recv, stream| unsafe {
                sys::ncclAllGather(
                    send as *const _,
                    recv as *mut _,
                    len,
                    sys::ncclDataType_t::ncclUint8,
                    comm,
                    stream,
                )
            },
            "ncclAllGather",
        )?;
        Ok(out)
    }

    fn all_reduce_sum(&mut self, counts: &mut [u64]) -> Result<()> {
        let mine: Vec<u8> = counts.iter().flat_map(|c| c.to_le_bytes()).collect();
        let mut out = vec![0u8; mine.len()];
        let comm = self.comm;
        let count = counts.len();
        self.run(
            &mine,
            &mut out,
            // SAFETY: `send` and `recv` hold `count` u64 each, on this rank's GPU.
            |send, recv, stream| unsafe {
                sys::ncclAllReduce(
                    send as *const _,
                    recv as *mut _,
                    count,
                    sys::ncclDataType_t::ncclUint64,
                    sys::ncclRedOp_t::ncclSum,
                    comm,
                    stream,
                )
            },
            "ncclAllReduce",
        )?;
        for (c, b) in counts.iter_mut().zip(out.chunks_exact(8)) {
            *c = u64::from_le_bytes(b.try_into().expect("8 bytes"));
        }
        Ok(())
    }
}

impl Drop for NcclCommunicator {
    fn drop(&mut self) {
        let _current = self.gpu.make_current();
        if !self.aborted {
            // A clean shutdown waits for the communicator's work; errors have no caller to go to.
            let _ = self.wait("the last collective");
            if !self.aborted {
                // SAFETY: the communicator is live and idle; it is not used after this.
                unsafe { sys::ncclCommDestroy(self.comm) };
            }
        }
    }
}
