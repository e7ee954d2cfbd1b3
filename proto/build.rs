//! Compiles `proto/kairos/v1/*.proto` with protoc (from `PROTOC` or the PATH; Debian's
//! `protobuf-compiler` provides it) into tonic clients, servers and a descriptor set for
//! gRPC server reflection.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["common", "worker", "admin", "ingest", "postings"]
        .map(|f| format!("proto/kairos/v1/{f}.proto"));
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    tonic_prost_build::configure()
        .file_descriptor_set_path(out.join("kairos_descriptor.bin"))
        .compile_protos(&files, &["proto".to_string()])?;
    Ok(())
}
