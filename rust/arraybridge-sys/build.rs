// Links libarraybridge: from ARRAYBRIDGE_LIB_DIR, else the repository's build/lib.
// The rpath lets this crate's own tests run without LD_LIBRARY_PATH; the directory
// is passed on to dependents (DEP_ARRAYBRIDGE_LIB_DIR, so their build scripts can
// add the same rpath) and to the crate itself (arraybridge_sys::LIB_DIR).
use std::env;
use std::path::PathBuf;

fn main() {
    let dir = match env::var("ARRAYBRIDGE_LIB_DIR") {
        Ok(dir) => PathBuf::from(dir),
        Err(_) => PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../build/lib"),
    };
    let dir = dir.canonicalize().unwrap_or_else(|_| {
        panic!("libarraybridge not found in {} (run `make` first or set ARRAYBRIDGE_LIB_DIR to an absolute path)", dir.display())
    });
    println!("cargo:rerun-if-env-changed=ARRAYBRIDGE_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=arraybridge");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    println!("cargo:rustc-env=ARRAYBRIDGE_SYS_LIB_DIR={}", dir.display());
    println!("cargo:lib_dir={}", dir.display());
}
