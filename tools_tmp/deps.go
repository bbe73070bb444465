package main
import (
 _ "github.com/jackc/pgx/v5"
 _ "github.com/jackc/pgx/v5/pgxpool"
 _ "github.com/jackc/pglogrepl"
 _ "github.com/labstack/echo/v4"
 _ "github.com/rs/zerolog"
 _ "go.yaml.in/yaml/v3"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "golang.org/x/sync/singleflight"
 _ "golang.org/x/time/rate"
 _ "github.com/openai/openai-go/v3"
 _ "github.com/anthropics/anthropic-sdk-go/v2"
 _ "github.com/a2aproject/a2a-go/a2aclient"
 _ "github.com/stretchr/testify/require"
 _ "github.com/google/uuid"
)
func main(){}
