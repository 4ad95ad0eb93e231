//! Every raw call into CUDA (driver and NVRTC, through cudarc with dynamic loading) lives here, in
//! the style of cudarc's own `sys`/`result`/`safe` layering: nothing of cudarc leaks out of this
//! module; callers see strings, `Vec<i32>` and the small handles below.

use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaStream, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::{CompileOptions, Ptx};
use std::sync::{Arc, OnceLock};

/// Loads `$PHASECHECK_NVRTC_LIB` (if set) globally first, so cudarc's loader, which searches by
/// file name, finds that exact library already in the process.
fn preload_nvrtc() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        if let Ok(path) = std::env::var("PHASECHECK_NVRTC_LIB") {
            // SAFETY: loading a shared library runs its initialisers; libnvrtc's are benign.
            #[cfg(unix)]
            unsafe {
                use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_NOW};
                if let Ok(lib) = Library::open(Some(&path), RTLD_NOW | RTLD_GLOBAL) {
                    std::mem::forget(lib);
                }
            }
        }
    });
}

/// Whether the CUDA driver library can be loaded (checked before anything touches the driver:
/// cudarc panics when it is missing).
pub fn driver_present() -> bool {
    // SAFETY: only tries to dlopen the driver library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Whether libnvrtc can be loaded.
pub fn nvrtc_present() -> bool {
    preload_nvrtc();
    // SAFETY: only tries to dlopen the NVRTC library.
    unsafe { cudarc::nvrtc::sys::is_culib_present() }
}

/// Compile CUDA C++ to PTX for `arch` (e.g. "sm_90"). Err carries NVRTC's log.
pub fn compile_ptx(src: &str, name: &str, arch: &'static str, include_paths: &[String], extra: &[String]) -> Result<String, String> {
    if !nvrtc_present() {
        return Err("libnvrtc not found (set LD_LIBRARY_PATH or PHASECHECK_NVRTC_LIB)".into());
    }
    let opts = CompileOptions {
        arch: Some(arch),
        include_paths: include_paths.to_vec(),
        options: extra.to_vec(),
        name: Some(name.to_string()),
        ..Default::default()
    };
    match std::panic::catch_unwind(|| cudarc::nvrtc::compile_ptx_with_opts(src, opts)) {
        Ok(Ok(ptx)) => Ok(ptx.to_src()),
        Ok(Err(e)) => Err(format!("{e:?}")),
        Err(_) => Err("NVRTC panicked (library missing or unusable)".into()),
    }
}

/// An open device: context plus its default stream.
pub struct Gpu {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
}

/// A loaded module.
pub struct Module {
    module: Arc<CudaModule>,
}

/// One kernel launch's inputs; `out_words` zeroed words come back.
pub struct Launch<'a> {
    pub symbol: &'a str,
    pub grid: u32,
    pub block: u32,
    pub out_words: usize,
    pub src: &'a [i32],
    pub src_words: i32,
    pub sched: &'a [i32],
    pub timeout_ns: u64,
    pub seed: u32,
    pub max_delay: u32,
}

impl Gpu {
    /// Open device 0. Call `driver_present()` first.
    pub fn open() -> Result<Gpu, String> {
        let ctx = std::panic::catch_unwind(|| CudaContext::new(0))
            .map_err(|_| "CUDA context creation panicked".to_string())?
            .map_err(|e| format!("cannot open CUDA device 0: {e:?}"))?;
        let stream = ctx.default_stream();
        Ok(Gpu { ctx, stream })
    }

    pub fn name(&self) -> String {
        self.ctx.name().unwrap_or_else(|_| "unknown CUDA device".into())
    }

    /// The kernel driver's release (e.g. "580.159.04", from /proc/driver/nvidia/version, as
    /// nvidia-smi reports it) and the CUDA version the driver API supports (e.g. "CUDA 13.0").
    pub fn driver_version(&self) -> String {
        let mut v: std::ffi::c_int = 0;
        // SAFETY: writes one int; the driver is loaded (a context exists).
        let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut v) };
        let cuda = if r == cudarc::driver::sys::CUresult::CUDA_SUCCESS {
            format!("CUDA {}.{}", v / 1000, (v % 1000) / 10)
        } else {
            "CUDA unknown".into()
        };
        // "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...":
        // the first word made of digits and dots with at least one dot.
        let release = std::fs::read_to_string("/proc/driver/nvidia/version").ok().and_then(|t| {
            let line = t.lines().next()?.to_string();
            line.split_whitespace()
                .find(|w| w.contains('.') && w.chars().all(|c| c.is_ascii_digit() || c == '.'))
                .map(str::to_string)
        });
        match release {
            Some(r) => format!("{r} ({cuda})"),
            None => cuda,
        }
    }

    pub fn load(&self, ptx: &str) -> Result<Module, String> {
        let module = self
            .ctx
            .load_module(Ptx::from_src(ptx.to_string()))
            .map_err(|e| format!("module load failed: {e:?}"))?;
        Ok(Module { module })
    }

    /// A generated kernel's shared state in bytes (the `__device__` constant beside it).
    fn shared_bytes(&self, m: &Module, symbol: &str) -> Result<u32, String> {
        let name = crate::codegen::smem_symbol(symbol);
        let view = m
            .module
            .get_global(&name, &self.stream)
            .map_err(|e| format!("no constant {name}: {e:?}"))?;
        let bytes: Vec<u8> = self.stream.clone_dtoh(&view).map_err(|e| format!("read {name}: {e:?}"))?;
        let b: [u8; 4] = bytes
            .get(..4)
            .and_then(|b| b.try_into().ok())
            .ok_or(format!("{name} is not 4 bytes"))?;
        Ok(u32::from_le_bytes(b))
    }

    /// A kernel with TMA descriptors (`tensormap`) has a `PcTmapHost` (`codegen::tmap_symbol`,
    /// layout in codegen/prelude/tensormap.cuh): give it a tensor source (768 rows of
    /// `src_words` words, row r stamped r - 256), per-block descriptor slots, and a real
    /// `CUtensorMap` (cuTensorMapEncodeTiled: 1-D, int32, 512 rows, the kernel's box). A kernel
    /// without one gets nothing (Ok(None)). Any failure is this launch's error, before the launch.
    fn tensor_map(
        &self,
        m: &Module,
        l: &Launch,
    ) -> Result<Option<(cudarc::driver::CudaSlice<i32>, cudarc::driver::CudaSlice<u8>)>, String> {
        use cudarc::driver::sys as cu;
        use cudarc::driver::DevicePtr;
        let name = crate::codegen::tmap_symbol(l.symbol);
        let Ok(mut view) = m.module.get_global(&name, &self.stream) else {
            return Ok(None);
        };
        let mut host: Vec<u8> = self
            .stream
            .clone_dtoh(&view)
            .map_err(|e| format!("tensor map: read {name}: {e:?}"))?;
        if host.len() < 160 {
            return Err(format!("tensor map: {name} is {} bytes, not a PcTmapHost", host.len()));
        }
        let word = |h: &[u8], at: usize| i32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
        let (box_words, nbuf) = (word(&host, 148), word(&host, 152));
        let row_words = l.src_words;
        if !(1..=256).contains(&box_words) || box_words % 4 != 0 || nbuf < 1 || row_words < 4 || row_words % 4 != 0 {
            return Err(format!(
                "tensor map: box of {box_words} words, {nbuf} slots, rows of {row_words} words: not a tensor map TMA takes"
            ));
        }
        const ROWS: usize = 768;
        let rows_host: Vec<i32> = (0..ROWS)
            .flat_map(|r| std::iter::repeat_n(r as i32 - 256, row_words as usize))
            .collect();
        let rows = self.stream.clone_htod(&rows_host).map_err(|e| format!("tensor map: copy: {e:?}"))?;
        let slots = self
            .stream
            .alloc_zeros::<u8>(l.grid as usize * nbuf as usize * 128)
            .map_err(|e| format!("tensor map: alloc: {e:?}"))?;
        let (rows_ptr, slots_ptr) = {
            let (r, _r) = rows.device_ptr(&self.stream);
            let (s, _s) = slots.device_ptr(&self.stream);
            (r, s)
        };
        let mut map = cu::CUtensorMap { opaque: [0; 16] };
        let dims: [u64; 1] = [512 * row_words as u64];
        let strides: [u64; 1] = [row_words as u64 * 4]; // rank 1 reads none of it
        let boxes: [u32; 1] = [box_words as u32];
        let elem: [u32; 1] = [1];
        // SAFETY: every pointer is to a live local of the size the call reads for rank 1; the
        // driver is loaded (a context exists). A missing entry point panics in cudarc's loader:
        // caught, and this launch's error.
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe {
            cu::cuTensorMapEncodeTiled(
                &mut map,
                cu::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_INT32,
                1,
                rows_ptr as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                boxes.as_ptr(),
                elem.as_ptr(),
                cu::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                cu::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
                cu::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
                cu::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        }))
        .map_err(|_| "tensor map: cuTensorMapEncodeTiled is missing from the driver".to_string())?;
        if r != cu::CUresult::CUDA_SUCCESS {
            return Err(format!(
                "tensor map: cuTensorMapEncodeTiled failed ({r:?}) for a 1-D int32 tensor of {} elements, box {box_words}",
                dims[0]
            ));
        }
        for (i, w) in map.opaque.iter().enumerate() {
            host[i * 8..i * 8 + 8].copy_from_slice(&w.to_le_bytes());
        }
        host[128..136].copy_from_slice(&rows_ptr.to_le_bytes());
        host[136..144].copy_from_slice(&slots_ptr.to_le_bytes());
        host[144..148].copy_from_slice(&(row_words * 4).to_le_bytes());
        host[156..160].copy_from_slice(&1i32.to_le_bytes());
        self.stream
            .memcpy_htod(&host, &mut view)
            .map_err(|e| format!("tensor map: write {name}: {e:?}"))?;
        Ok(Some((rows, slots)))
    }

    /// Launch and wait; Err carries the CUDA error (a sticky one leaves this context unusable).
    /// `launching` is called once the kernel is loaded and its buffers are in place, just before
    /// the launch: what happens after it is the kernel's own time (the host's hang limit for a
    /// launch on hardware barriers counts from there).
    pub fn run(&self, m: &Module, l: &Launch, launching: &dyn Fn()) -> Result<Vec<i32>, String> {
        let f: CudaFunction = m
            .module
            .load_function(l.symbol)
            .map_err(|e| format!("no kernel {}: {e:?}", l.symbol))?;
        let smem = self.shared_bytes(m, l.symbol)?;
        let limit = self
            .ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
            .map_err(|e| format!("device attribute: {e:?}"))?;
        if smem > limit.max(0) as u32 {
            return Err(format!(
                "not expressible: the kernel's shared state takes {smem} bytes, more than the device's opt-in limit of {limit}"
            ));
        }
        // Past 48 KB a kernel must opt in to its dynamic shared memory.
        f.set_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            smem as i32,
        )
        .map_err(|e| format!("set shared memory size: {e:?}"))?;
        let mut out = self
            .stream
            .alloc_zeros::<i32>(l.out_words.max(1))
            .map_err(|e| format!("alloc: {e:?}"))?;
        let src = self.stream.clone_htod(l.src).map_err(|e| format!("copy: {e:?}"))?;
        let sched = self.stream.clone_htod(l.sched).map_err(|e| format!("copy: {e:?}"))?;
        // A kernel with TMA descriptors gets its tensor map (kept alive until the launch is done).
        let _tensor_map = self.tensor_map(m, l)?;
        let cfg = LaunchConfig {
            grid_dim: (l.grid, 1, 1),
            block_dim: (l.block, 1, 1),
            shared_mem_bytes: smem,
        };
        let mut b = self.stream.launch_builder(&f);
        b.arg(&mut out)
            .arg(&src)
            .arg(&l.src_words)
            .arg(&sched)
            .arg(&l.timeout_ns)
            .arg(&l.seed)
            .arg(&l.max_delay);
        launching();
        // SAFETY: the argument list matches the generated kernel's signature
        // (int*, const int*, int, const int*, u64, unsigned, unsigned).
        unsafe { b.launch(cfg) }.map_err(|e| format!("launch: {e:?}"))?;
        self.stream.synchronize().map_err(|e| format!("{e:?}"))?;
        self.stream.clone_dtoh(&out).map_err(|e| format!("{e:?}"))
    }
}
