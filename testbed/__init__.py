"""Local stand-ins for what a deployment has, shared by the tests and the benchmarks: a Docker registry, an S3 object
store (SeaweedFS), a headless browser (Debian's Chromium) and a sandbox layer that counts its Docker calls. Neither
the library nor the faces import it."""
