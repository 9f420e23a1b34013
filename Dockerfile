# One image for every Pressroom process. The command picks the process:
#   relay | worker --queues Q | serve --host 0.0.0.0 | mcp | any CLI command
# (submit, status, approve, ...). docker-compose.yml runs the whole topology
# from this image; docs/deploy.md explains it.
#
# Configuration comes from the environment at run time (PRESSROOM_*, OTEL_*);
# nothing secret is baked in. Set PRESSROOM_SECRET for every process.

# -- build: a wheel of the project, so no source tree ends up in the image ----
FROM python:3.11-slim AS build

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY . .
RUN pip wheel --no-deps --wheel-dir /wheels .

# -- runtime ------------------------------------------------------------------
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# git: the git: destination runs the git command line.
RUN apt-get update \
    && apt-get install -y --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*

# The project and its runtime dependencies only (no dev extras). A deployment
# that sets PRESSROOM_MODEL needs the `llm` extra (the openai client):
#   docker build --build-arg PRESSROOM_EXTRAS=llm .
ARG PRESSROOM_EXTRAS=""
COPY --from=build /wheels /tmp/wheels
RUN pip install "$(ls /tmp/wheels/pressroom-*.whl)${PRESSROOM_EXTRAS:+[$PRESSROOM_EXTRAS]}" \
    && rm -rf /tmp/wheels

# A fixed non-root uid, so files on shared volumes have one owner in every
# container. /srv/site and /srv/git exist here (owned by that user) so that a
# named volume mounted there starts out writable; /app is the working
# directory for relative paths (e.g. the default .pressroom-secret file).
RUN groupadd --system --gid 10001 pressroom \
    && useradd --system --uid 10001 --gid pressroom --create-home --home-dir /home/pressroom \
        --shell /usr/sbin/nologin pressroom \
    && mkdir -p /app /srv/site /srv/git \
    && chown pressroom:pressroom /app /srv/site /srv/git

USER pressroom
WORKDIR /app

EXPOSE 8080

ENTRYPOINT ["pressroom"]
# serve binds 127.0.0.1 by default; in a container it must listen on all
# interfaces to be reachable. Until the first user is added (open mode) it asks
# no one for a token: publish the port only to localhost or behind a proxy, and
# add that user first (see docs/deploy.md). GET /healthz needs no token.
CMD ["serve", "--host", "0.0.0.0", "--port", "8080"]
