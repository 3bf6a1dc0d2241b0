# The image that runs interlock. Slim base, non-root, works with a read-only root filesystem
# (nothing is written outside /tmp; bytecode is compiled at build time).
FROM python:3.11-slim AS build
# The compiled build (setup.py): the edge's hot modules as C extensions, compiled by mypyc; the
# C compiler is needed here only, not in the image. --build-arg INTERLOCK_MYPYC=0: pure Python.
ARG INTERLOCK_MYPYC=1
RUN if [ "$INTERLOCK_MYPYC" = 1 ]; then apt-get update -q \
    && apt-get install -y -q --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*; fi
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
# interlock/manifests links to manifests/: the CRDs and examples ship inside the wheel.
COPY manifests ./manifests
COPY interlock ./interlock
# With the otel extra: --otlp-endpoint works in the image (the SDK is imported only when used).
RUN INTERLOCK_MYPYC=$INTERLOCK_MYPYC pip wheel --no-cache-dir --wheel-dir /wheels '.[otel]'

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl \
    && rm -rf /wheels \
    && python -m compileall -q /usr/local/lib/python3.11/site-packages \
    && groupadd --system --gid 10001 interlock \
    && useradd --system --uid 10001 --gid interlock --home-dir /nonexistent --shell /usr/sbin/nologin interlock
USER 10001:10001
EXPOSE 8080 8090 9090
ENTRYPOINT ["interlock"]
CMD ["run"]
