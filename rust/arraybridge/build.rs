// Link arguments do not travel from a dependency's build script, so the rpath to
// the libarraybridge that arraybridge-sys linked (DEP_ARRAYBRIDGE_LIB_DIR) is
// added here too: this crate's tests and examples run without LD_LIBRARY_PATH.
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_ARRAYBRIDGE_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_ARRAYBRIDGE_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir);
    }
}
