package main

import (
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/annal-dev/annal/agentmcp"
	"github.com/annal-dev/annal/internal/cli"
)

func mcpCommand(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "mcp",
		Short: "Serve the kernel as an MCP server on stdin/stdout, acting with your credential (for agent hosts that spawn servers)",
		Long: `annal mcp speaks the Model Context Protocol on stdin and stdout. Tools: submit (an action, before you
perform it), wait_hold, proof, budget, record_turn, vfs_write. Resources: annal://checkpoint,
annal://events/{index}, annal://history, annal://policies, vfs://sessions/{id}/{path}, vfs://{agent}/{path}
(the agent file system). It acts with the credential of --credential,
--credential-file, ANNAL_CREDENTIAL or ANNAL_CREDENTIAL_FILE, against --server (ANNAL_SERVER).
annald serves the same over streamable HTTP at /mcp, for a bearer credential.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.client(true)
			if err != nil {
				return err
			}
			return agentmcp.NewServer(c, cli.Version()).Run(cmd.Context(), &mcp.StdioTransport{})
		},
	}
}
