# A Ketch broker image. Build from any Debian/Python 3.11+ base you have locally, e.g.
#   docker build --build-arg BASE=python:3.11-slim -t ketch .
ARG BASE=python:3.11-slim
FROM ${BASE}
WORKDIR /opt/ketch
COPY pyproject.toml README.md ./
COPY protocol protocol
COPY storage storage
COPY broker broker
COPY client client
COPY pipeline pipeline
RUN python3 -m pip install --no-cache-dir .
EXPOSE 9092 9464
VOLUME /data
ENV KETCH_LOG_FORMAT=json
ENTRYPOINT ["ketch", "broker", "--data-dir", "/data"]
CMD ["--listen", "0.0.0.0:9092", "--advertise", "localhost:9092"]
