# rmsnorm-dashboard on a cloud GPU:
#   docker build -t rmsnorm-dashboard .
#   docker run --gpus all -p 8000:8000 -e RMSNORM_API_TOKEN=change-me -v rmsnorm-data:/data rmsnorm-dashboard
# The stack every committed result was measured on: torch 2.11 (CUDA 13.0) and Triton 3.6. The base brings CUDA and
# PyTorch; the install line below pins torch and Triton to exactly those versions (tests/deploy checks both against
# results/*.json), and at start-up every GPU worker runs one Triton case: /api/health answers 503 if it failed.
FROM pytorch/pytorch:2.11.0-cuda13.0-cudnn9-runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    RMSNORM_DATA_DIR=/data \
    RMSNORM_SELF_CHECK=gpu \
    RMSNORM_EXPECT_VERSIONS=torch=2.11.0,triton=3.6.0

WORKDIR /opt/rmsnorm-dashboard

COPY pyproject.toml README.md constraints.txt ./
COPY rmsnorm_kernels ./rmsnorm_kernels
COPY engine ./engine
COPY app ./app
COPY rmsnorm_dash ./rmsnorm_dash
COPY static ./static
COPY templates ./templates
COPY results ./results
COPY examples ./examples

# A C/C++ compiler: Triton builds its small launcher with `cc`, and the native autograd node (rmsnorm_kernels/native,
# the low-host-overhead launch path of issue 16) is compiled on first use with `c++` against torch's headers; without
# one the Python launch path is used. The runtime image may not bring g++ (the distribution's package, unpinned so
# that it takes security updates).
# hadolint ignore=DL3008
RUN apt-get update && apt-get install -y --no-install-recommends g++ && rm -rf /var/lib/apt/lists/*

# Editable install: the service finds static/, templates/ and results/ beside its source.
# torch is not a dependency of the package, so the image's CUDA build of torch stays as it is.
# The web stack at the versions of constraints.txt (what the suite passed with).
RUN pip install --no-cache-dir -c constraints.txt "torch==2.11.0" "triton==3.6.0" -e ".[web]" \
    && groupadd --gid 10001 rmsnorm && useradd --create-home --uid 10001 --gid 10001 --shell /usr/sbin/nologin rmsnorm \
    && mkdir -p /data \
    && chown 10001:10001 /data

USER 10001:10001
VOLUME ["/data"]
EXPOSE 8000

HEALTHCHECK --interval=30s --timeout=5s --start-period=180s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/api/health', timeout=4)"]

# Bound to 0.0.0.0 inside the container, the service requires RMSNORM_API_TOKEN for POST /benchmark and DELETE;
# set RMSNORM_ALLOW_NO_TOKEN=1 to disable that deliberately.
CMD ["rmsnorm-dash", "serve", "--host", "0.0.0.0", "--port", "8000", "--data", "/data"]
