# The Ketch broker image. `docker compose up --build` builds it (docker-compose.yml runs three).
#
#   docker build -t ketch .                                          # on python:3.11-slim
#   docker build --build-arg BASE=ketch-base:bookworm -t ketch .     # no image registry reachable:
#                                                                    # docker/build-base.sh makes that base
#
# BASE is any Debian-based image; Python 3.11 comes from it when it has one (python:3.11-slim) and
# from Debian's apt otherwise (a bare bookworm). Every dependency is a binary wheel, so neither
# stage compiles anything; the final stage holds only Python, the virtualenv and the healthcheck.
ARG BASE=python:3.11-slim

FROM ${BASE} AS build
RUN if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then \
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 python3-venv \
      && rm -rf /var/lib/apt/lists/*; fi
RUN python3 -m venv /opt/ketch
WORKDIR /src
COPY pyproject.toml README.md ./
COPY protocol protocol
COPY storage storage
COPY broker broker
COPY client client
COPY pipeline pipeline
# docker/wheels/ is empty in the repository: pip takes the dependencies from PyPI. Where the build
# cannot reach PyPI itself (a proxy whose TLS certificate the base does not trust), `make
# compose-test` fills it from the host first and pip installs from it alone. Ketch itself is
# always built from the source above. pip and setuptools are not needed at run time.
COPY docker/wheels /wheels
RUN if ls /wheels/*.whl >/dev/null 2>&1; then FROM_WHEELS="--no-index --find-links /wheels"; fi; \
    /opt/ketch/bin/pip install --no-cache-dir --disable-pip-version-check ${FROM_WHEELS:-} . \
    && /opt/ketch/bin/pip uninstall -y -q setuptools pip

FROM ${BASE}
RUN if ! command -v python3 >/dev/null; then \
      apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
      && apt-get clean && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; fi \
    && useradd --system --uid 10001 --user-group --home-dir /data --no-create-home --shell /usr/sbin/nologin ketch \
    && mkdir /data && chown ketch:ketch /data
COPY --from=build /opt/ketch /opt/ketch
COPY docker/healthcheck.py /opt/ketch/healthcheck.py
# A named volume mounted on /data starts as a copy of this directory, owned by ketch.
VOLUME /data
ENV PATH=/opt/ketch/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    KETCH_DATA_DIR=/data \
    KETCH_LOG_FORMAT=json \
    KETCH_LISTEN=0.0.0.0:9092
USER ketch
WORKDIR /data
# 9092 clients, 9093 the metadata quorum (controller listener), 9094 inter-broker, 9464 metrics
EXPOSE 9092 9093 9094 9464
HEALTHCHECK --interval=5s --timeout=10s --start-period=60s --retries=3 CMD ["python3", "/opt/ketch/healthcheck.py"]
# exec form: the broker is PID 1 and gets docker stop's SIGTERM itself (controlled shutdown)
ENTRYPOINT ["ketch", "broker"]
