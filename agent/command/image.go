package command

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/spf13/cobra"
	"k8s.io/utils/clock"

	"github.com/virtplane/terraform-provider-virtplane/internal/imagestore"
)

// The image import|list|remove commands work on the node's image
// directory directly, not through the agent's API: they ignore
// --endpoint, and importing means reading a file that is on the node
// anyway. image create|get|delete (image_api.go) manage the API's Images,
// which the nodes download into that directory themselves.

func newImageCommand(root *rootOptions) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Manage images: Images the nodes download (create, get, delete) and a node's image store (import, list, remove)",
		Long: `Manage the images that image and persistent volumes name by their path
relative to a node's image directory.

Through the agent (--endpoint), for every node:
  create, get, delete   Images: nodes download them by URL into their
                        image directory, all at once (--nodes all) or
                        each when an instance placed there needs one.

Locally on one node, on its image directory itself (--image-dir); they do
not talk to the agent:
  import, list, remove  files in this node's image directory.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "image-dir", imagestore.DefaultDir, "the node's image directory (import, list, remove)")
	cmd.AddCommand(newImageImportCommand(&dir), newImageListCommand(&dir), newImageRemoveCommand(&dir))
	cmd.AddCommand(newImageCreateCommand(root), newImageGetCommand(root), newImageDeleteCommand(root))
	cmd.AddCommand(newImageUploadCommand(root, clock.RealClock{}))
	return cmd
}

func newImageImportCommand(dir *string) *cobra.Command {
	var opts imagestore.ImportOptions
	cmd := &cobra.Command{
		Use:   "import NAME FILE",
		Short: "Copy a qcow2 or raw disk image into this node's store as NAME",
		Long: `Copy FILE into the image directory as NAME (a relative path such as
debian/12.qcow2). The image appears only once it is complete and verified:
its checksum (and --sha256 when given), qemu-img's view of it and, for
qcow2, qemu-img check. Images with a backing file are refused; flatten
them with qemu-img convert first.`,
		Example: `  virtplane-agent image import debian-12.qcow2 ./debian-12-genericcloud-amd64.qcow2 --sha256 5da2...`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := imagestore.Open(*dir)
			if err != nil {
				return err
			}
			img, err := s.Import(cmd.Context(), args[0], args[1], opts)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "image %s imported (%s, virtual size %s, sha256 %s)\n",
				img.Name, img.Format, formatBytes(img.VirtualSize), img.SHA256)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.ExpectedSHA256, "sha256", "", "SHA-256 (hex) the file must have")
	f.StringVar(&opts.Format, "format", "", "format the file must have: qcow2 or raw (default: from a .qcow2 or .raw name, else any)")
	f.BoolVar(&opts.Replace, "replace", false, "overwrite an existing image of that name")
	return cmd
}

func newImageListCommand(dir *string) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the images in this node's store",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(output); err != nil {
				return err
			}
			s, err := imagestore.Open(*dir)
			if err != nil {
				return err
			}
			images, err := s.List(cmd.Context())
			if err != nil {
				return err
			}
			if output != formatTable {
				return printImages(cmd.OutOrStdout(), output, images)
			}
			return printImageTable(cmd.OutOrStdout(), cmd.ErrOrStderr(), images)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", formatTable, "output format: table, json or yaml")
	return cmd
}

func newImageRemoveCommand(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:     "remove NAME",
		Aliases: []string{"rm"},
		Short:   "Delete an image from this node's store",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := imagestore.Open(*dir)
			if err != nil {
				return err
			}
			if err := s.Remove(cmd.Context(), args[0]); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "image %s removed\n", args[0])
			return err
		},
	}
}

// printImageTable prints NAME FORMAT VIRTUAL-SIZE SIZE SHA256 (the first
// 12 hex digits, as docker shortens IDs), and on errOut why any file could
// not be read as an image.
func printImageTable(out, errOut io.Writer, images []imagestore.Image) error {
	if len(images) == 0 {
		_, err := fmt.Fprintln(errOut, "No images found")
		return err
	}
	rows := make([][]string, len(images))
	for i, img := range images {
		rows[i] = []string{img.Name, none, none, formatBytes(img.Size), none}
		if img.Error == "" {
			rows[i][1], rows[i][2], rows[i][4] = img.Format, formatBytes(img.VirtualSize), img.SHA256[:min(12, len(img.SHA256))]
		}
	}
	if err := printTable(out, []string{"NAME", "FORMAT", "VIRTUAL-SIZE", "SIZE", "SHA256"}, rows); err != nil {
		return err
	}
	for _, img := range images {
		if img.Error != "" {
			if _, err := fmt.Fprintf(errOut, "warning: %s: %s\n", img.Name, img.Error); err != nil {
				return err
			}
		}
	}
	return nil
}

// printImages writes {"kind":"ImageList","items":[...]} as json or yaml,
// with the full checksums and byte counts.
func printImages(w io.Writer, format string, images []imagestore.Image) error {
	if images == nil {
		images = []imagestore.Image{}
	}
	j, err := json.Marshal(struct {
		Kind  string             `json:"kind"`
		Items []imagestore.Image `json:"items"`
	}{"ImageList", images})
	if err != nil {
		return fmt.Errorf("encode images: %w", err)
	}
	return writeJSONAs(w, format, j)
}

// formatBytes writes n with binary suffixes like quantities do: exact
// when it is a whole number of the largest unit ("2Gi"), else to one
// decimal ("1.5Gi"), in bytes below 1Ki.
func formatBytes(n int64) string {
	units := []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	if n < 1024 {
		return strconv.FormatInt(n, 10)
	}
	u, div := -1, int64(1)
	for u+1 < len(units) && n/div >= 1024 {
		u++
		div *= 1024
	}
	if n%div == 0 {
		return strconv.FormatInt(n/div, 10) + units[u]
	}
	s := strconv.FormatFloat(float64(n)/float64(div), 'f', 1, 64)
	if s == "1024.0" && u+1 < len(units) { // 1023.96Mi rounds up a unit
		return "1.0" + units[u+1]
	}
	return s + units[u]
}
